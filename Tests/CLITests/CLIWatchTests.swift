import Foundation
import Testing
import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `watch` prints the changes other processes make, and stops cleanly when interrupted.
@Suite struct CLIWatchTests {
    let sandbox: CLISandbox
    let store: String

    init() throws {
        sandbox = try CLISandbox()
        store = sandbox.path("settings")
        try sandbox.run("write", store, "streak", "364").expectSuccess()
        try sandbox.run("write", store, "old", "true").expectSuccess()
    }

    /// Starts `watch` and waits until it says it is watching, so no later write can be missed.
    func startWatching() throws -> CLIProcess {
        let watch = try sandbox.start("watch", store)
        try #require(watch.waitFor("note: watching '\(store)'", on: .stderr), "stderr: \(watch.stderr)")
        return watch
    }

    @Test func watchPrintsWritesFromOtherProcessesAndStopsOnControlC() throws {
        let watch = try startWatching()

        try sandbox.run("write", store, "streak", "365").expectSuccess()
        #expect(watch.waitFor("\"streak\": 365\n"), "stdout: \(watch.stdout)")
        try sandbox.run("write", store, "profile", #"{"name": "Ada",  "age": 36.0, "tags": ["a/b"]}"#).expectSuccess()
        #expect(watch.waitFor(#""profile": {"age":36,"name":"Ada","tags":["a/b"]}"# + "\n"), "stdout: \(watch.stdout)")
        try sandbox.run("delete", store, "old").expectSuccess()
        #expect(watch.waitFor("\"old\": (removed)\n"), "stdout: \(watch.stdout)")

        watch.send(SIGINT)
        #expect(watch.waitForExit() == 0, "stderr: \(watch.stderr)")
        #expect(
            watch.stdout == """
                "streak": 365
                "profile": {"age":36,"name":"Ada","tags":["a/b"]}
                "old": (removed)

                """)
        #expect(watch.stderr == "note: watching '\(store)' for changes; press Ctrl-C to stop.\n")
    }

    @Test func watchShowsTheWritersWriteIDAndEveryKeyOfACommit() throws {
        let watch = try startWatching()
        // This test process is the other process here, writing through the library.
        let storage = TinyStorage(insideDirectory: sandbox.root, name: "settings")
        let writeID = UUID().uuidString
        let items: [String: any Encodable] = ["a": 1, "b": 2]
        try storage.bulkStoreOrThrow(items: items, writeID: writeID)
        #expect(watch.waitFor("\"a\": 1  (writeID: \"\(writeID)\")\n"), "stdout: \(watch.stdout)")
        #expect(watch.waitFor("\"b\": 2  (writeID: \"\(writeID)\")\n"), "stdout: \(watch.stdout)")

        watch.send(SIGTERM)
        #expect(watch.waitForExit() == 0, "stderr: \(watch.stderr)")
    }

    @Test func watchShowsDataValuesAsBase64AndAnyWriteIDString() throws {
        let watch = try startWatching()
        let storage = TinyStorage(insideDirectory: sandbox.root, name: "settings")
        try storage.storeOrThrow(Data([0, 1, 2, 0xFF]), forKey: "avatar", writeID: "sync 42 \"é\"")
        #expect(
            watch.waitFor("\"avatar\": \"AAEC/w==\" (Data)  (writeID: \"sync 42 \\\"é\\\"\")\n"),
            "stdout: \(watch.stdout)")
        watch.send(SIGTERM)
        #expect(watch.waitForExit() == 0, "stderr: \(watch.stderr)")
    }

    @Test func watchWritesNothingToTheStore() throws {
        let before = sandbox.snapshot(store)
        let watch = try startWatching()
        watch.send(SIGINT)
        #expect(watch.waitForExit() == 0)
        #expect(watch.stdout.isEmpty)
        #expect(sandbox.snapshot(store) == before)
    }

    @Test func watchRefusesAPathThatIsNotAStore() throws {
        let missing = sandbox.path("missing")
        try sandbox.run("watch", missing).expectFailure(
            3, "'\(missing)' is not a TinyStorage store (it does not exist)")
        #expect(!sandbox.exists(missing))
    }

    @Test func watchRefusesAStoreFromANewerTinyStorage() throws {
        let file = URL(fileURLWithPath: store + "/store.tinystorage")
        let newer = DataFileBytes.header(try Data(contentsOf: file), withVersion: 99)
        try newer.write(to: file)
        let before = sandbox.snapshot(store)
        try sandbox.run("watch", store).expectFailure(4, "the store '\(store)' cannot be read (unsupportedFormat)")
        #expect(sandbox.snapshot(store) == before)
    }
}
