import Foundation
import Testing
import TinyStorage

/// The tool and the library, in two processes, read and write the same store.
@Suite struct CLILibraryTests {
    let sandbox: CLISandbox
    let store: String

    init() throws {
        sandbox = try CLISandbox()
        store = sandbox.path("settings")
    }

    struct Profile: Codable, Equatable {
        var name: String
        var age: Int
    }

    func openStore() -> TinyStorage {
        TinyStorage(insideDirectory: sandbox.root, name: "settings")
    }

    @Test func theToolReadsAStoreWrittenByTheLibrary() throws {
        let storage = openStore()
        try storage.storeOrThrow(365, forKey: "streak")
        try storage.storeOrThrow(true, forKey: "onboarded")
        try storage.storeOrThrow("Ada \"the first\"", forKey: "name")
        try storage.storeOrThrow(Profile(name: "Ada", age: 36), forKey: "profile")

        #expect(try sandbox.run("keys", store).output == "name\nonboarded\nprofile\nstreak\n")
        #expect(try sandbox.run("read", store, "streak").output == "365\n")
        #expect(try sandbox.run("read", store, "onboarded").output == "true\n")
        #expect(try sandbox.run("read", store, "name", "--raw").output == #""Ada \"the first\"""#)
        #expect(try sandbox.run("read", store, "profile").output == "{\n  \"age\" : 36,\n  \"name\" : \"Ada\"\n}\n")
    }

    @Test func theLibraryReadsWhatTheToolWrote() throws {
        let storage = openStore()
        try storage.storeOrThrow(364, forKey: "streak")

        try sandbox.run("write", store, "streak", "365").expectSuccess()
        try sandbox.run("write", store, "name", "--string", "Ada").expectSuccess()
        try sandbox.run("write", store, "profile", #"{"name": "Ada", "age": 36}"#).expectSuccess()
        try sandbox.run("delete", store, "gone", "--ignore-missing").expectSuccess()

        // The instance opened before the tool ran sees the tool's commits.
        #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 365)
        #expect(try storage.retrieveOrThrow(type: String.self, forKey: "name") == "Ada")
        #expect(try storage.retrieveOrThrow(type: Profile.self, forKey: "profile") == Profile(name: "Ada", age: 36))

        try sandbox.run("delete", store, "streak").expectSuccess()
        #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == nil)
    }

    @Test func writeStringStoresTheBytesTheLibraryWouldStore() throws {
        let text = "tab\there, quote \" and slash /"
        try sandbox.run("write", store, "cli", "--string", text).expectSuccess()
        let storage = openStore()
        try storage.storeOrThrow(text, forKey: "library")
        let cli = try sandbox.run("read", store, "cli", "--raw").output
        let library = try sandbox.run("read", store, "library", "--raw").output
        #expect(cli == library)
    }

    @Test func aFailedWriteIsReportedAndChangesNothing() throws {
        // A file past a 512-byte file-size limit (`ulimit -f` counts 512-byte blocks in `sh`),
        // and a write that needs it to grow, so the kernel refuses (EFBIG; SIGXFSZ is ignored)
        // while reading still works. On Linux space is allocated ahead of the log, half as much
        // again rounded up to 64 KiB: after the library's 174.5 KB, the file is 256 KiB, and the
        // tool's value (100 KB) does not fit.
        let storage = openStore()
        try storage.storeOrThrow(String(repeating: "x", count: 174_500), forKey: "blob")
        // NB: the store's background flush writes its durable mark into the header up to a second
        // after the commit, even once the store is released; after `synchronize()` it finds that
        // mark written and writes nothing. So the bytes are final before they are compared.
        try storage.synchronize()
        let before = sandbox.dataFile(store)
        let value = String(repeating: "y", count: 100_000)
        // NB: TMPDIR names no folder: a ThreadSanitizer build (CI's sanitizer lane) writes a
        // 512 KiB file there as it starts (`tsan.rodata.<pid>`, mapped over the shadow of read-only
        // memory), and, cut short by the limit, the mapping kills the tool with SIGBUS before its
        // `main`. With no folder there it does without the file. The tool's `write` uses no TMPDIR.
        let prelude = "trap '' XFSZ; ulimit -f 1; export TMPDIR='\(sandbox.path("no-such-folder"))'"
        let result = try sandbox.run(after: prelude, "write", store, "k", "--string", value)
        result.expectFailure(6, "writing to the store '\(store)' failed (io)")
        #expect(sandbox.dataFile(store) == before)
        #expect(try sandbox.run("keys", store).output == "blob\n")
    }
}
