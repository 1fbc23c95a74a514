import Foundation
import Testing
import TinyStorage

/// `verify` reports healthy, damaged and interrupted stores with its exit codes, and changes nothing.
@Suite struct CLIVerifyTests {
    let sandbox: CLISandbox
    /// A store of ten keys written by the library, whose file ends where its records end.
    let store: String

    init() throws {
        sandbox = try CLISandbox()
        store = sandbox.path("settings")
        // NB: on Linux the file goes on past the records, with space allocated ahead (zeros).
        let storage = TinyStorage(insideDirectory: sandbox.root, name: "settings")
        for index in 0..<10 {
            try storage.storeOrThrow(String(repeating: "value \(index) ", count: 4), forKey: "key\(index)")
        }
    }

    /// A copy of the store without its lock file, so a test can see that nothing creates one.
    func copyOfStore(_ name: String) throws -> String {
        let copy = sandbox.path(name)
        try FileManager.default.copyItem(atPath: store, toPath: copy)
        try FileManager.default.removeItem(atPath: copy + "/store.lock")
        return copy
    }

    func dataFileURL(_ path: String) -> URL { URL(fileURLWithPath: path + "/store.tinystorage") }

    @Test func aHealthyStoreExitsWithZeroAndIsLeftAsItWas() throws {
        let copy = try copyOfStore("healthy")
        let before = sandbox.snapshot(copy)
        let result = try sandbox.run("verify", copy)
        result.expectSuccess()
        let bytes = try #require(sandbox.dataFile(copy))
        let (size, end) = (bytes.count, DataFileBytes.logicalEnd(bytes))
        #expect(result.output.contains("data file:   \(copy)/store.tinystorage (\(size) bytes)\n"))
        #expect(result.output.contains("header:      ok: format version 2, generation "))
        let reserved = size > end ? "; the \(size - end) bytes after it are zeros reserved for later writes" : ""
        #expect(result.output.contains("records:     10 verified, ending at offset \(end)\(reserved)\n"))
        #expect(result.output.contains("keys:        10\n"))
        #expect(result.output.contains("damage:      none\n"))
        #expect(result.output.contains("quarantine:  none\n"))
        #expect(result.output.hasSuffix("result:      healthy\n"))
        #expect(sandbox.snapshot(copy) == before, "verify created or changed a file")
    }

    @Test func aFlippedByteInARecordIsReportedWithItsOffsetAndExitCode7() throws {
        let copy = try copyOfStore("damaged")
        var bytes = try #require(sandbox.dataFile(copy))
        let flipped = DataFileBytes.logicalEnd(bytes) / 2
        bytes[flipped] ^= 0xFF
        try bytes.write(to: dataFileURL(copy))
        let before = sandbox.snapshot(copy)

        let result = try sandbox.run("verify", copy)
        #expect(result.status == 7, "stderr: \(result.stderr)")
        #expect(result.stderr.isEmpty)
        #expect(result.output.contains("records:     9 verified\n"))
        #expect(result.output.contains("keys:        9\n"))
        #expect(result.output.contains("result:      DAMAGED: "))
        // The damaged range is the record that holds the flipped byte.
        let line = try #require(result.output.split(separator: "\n").first { $0.contains("at offset ") })
        let numbers = line.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
        let (offset, length) = (try #require(numbers.first), try #require(numbers.dropFirst().first))
        #expect(offset <= flipped && flipped < offset + length, "\(line) should cover byte \(flipped)")
        #expect(result.output.contains("damage:      \(length) bytes in 1 place(s)\n"))
        #expect(sandbox.snapshot(copy) == before, "verify changed the damaged store")

        // The other read-only commands show what verifies, warn once, and change nothing either.
        let keys = try sandbox.run("keys", copy)
        #expect(keys.status == 0)
        #expect(keys.output.split(separator: "\n").count == 9)
        #expect(keys.stderr.hasPrefix("warning: \(length) bytes of the store '\(copy)' failed verification"))
        let info = try sandbox.run("info", copy)
        #expect(info.output.contains("damage:      \(length) bytes in 1 place(s) failed verification"))
        #expect(sandbox.snapshot(copy) == before, "a read-only command changed the damaged store")
    }

    @Test func anIncompleteLastRecordIsAnInterruptedWriteWithExitCode8() throws {
        let copy = try copyOfStore("torn")
        var bytes = try #require(sandbox.dataFile(copy))
        let end = DataFileBytes.logicalEnd(bytes)
        // A frame promising 64 bytes, cut short: where the remains of a write lie, in the zeros
        // allocated ahead (Linux) or at the end of the file.
        bytes = bytes.prefix(end) + [64, 0, 0, 0, 1, 2, 3, 4, 5, 6] + bytes.dropFirst(end + 10)
        try bytes.write(to: dataFileURL(copy))
        let before = sandbox.snapshot(copy)

        let result = try sandbox.run("verify", copy)
        #expect(result.status == 8, "stderr: \(result.stderr)")
        #expect(result.output.contains("at offset \(end): 10 bytes (\(end)..<\(end + 10))"))
        #expect(result.output.contains("keys:        10\n"))
        #expect(result.output.contains("result:      INTERRUPTED WRITE: "))
        #expect(result.output.contains("nothing acknowledged was lost"))
        #expect(sandbox.snapshot(copy) == before)

        // Reading commands ignore the unfinished write without a word and without repairing it.
        let keys = try sandbox.run("keys", copy)
        keys.expectSuccess()
        #expect(keys.output.split(separator: "\n").count == 10)
        #expect(try sandbox.run("info", copy).output.contains("damage:      an interrupted last write (10 bytes)"))
        #expect(sandbox.snapshot(copy) == before)
    }

    @Test func aDamagedHeaderIsReportedAndTheFileKept() throws {
        let copy = try copyOfStore("header")
        var bytes = try #require(sandbox.dataFile(copy))
        bytes[0] ^= 0xFF
        try bytes.write(to: dataFileURL(copy))
        let before = sandbox.snapshot(copy)
        let result = try sandbox.run("verify", copy)
        #expect(result.status == 7)
        #expect(result.output.contains("header:      DAMAGED: the data file does not start with TinyStorage's header"))
        #expect(result.output.contains("result:      DAMAGED: TinyStorage will not open this store"))
        #expect(sandbox.snapshot(copy) == before)
    }

    @Test func quarantineFilesAreListed() throws {
        let quarantine = store + "/quarantine"
        try FileManager.default.createDirectory(atPath: quarantine, withIntermediateDirectories: false)
        try Data("old damage".utf8).write(to: URL(fileURLWithPath: quarantine + "/damaged-1.tinystorage"))
        let result = try sandbox.run("verify", store)
        result.expectSuccess()
        #expect(result.output.contains("quarantine:  1 file(s) in \(quarantine)\n"))
        #expect(result.output.contains("\n               damaged-1.tinystorage\n"))
    }

    // MARK: Bad input

    @Test func aMissingPathIsNotAStoreAndIsNotCreated() throws {
        let missing = sandbox.path("missing")
        try sandbox.run("verify", missing).expectFailure(
            3, "'\(missing)' is not a TinyStorage store (it does not exist)")
        #expect(!sandbox.exists(missing))
    }

    @Test func aDirectoryWithoutADataFileIsNotAStore() throws {
        let folder = sandbox.path("folder")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        try sandbox.run("verify", folder).expectFailure(3, "(no store.tinystorage inside)")
        #expect(sandbox.snapshot(folder).isEmpty)
    }

    @Test func aDirectoryAtTheDataFilesNameExitsWith9() throws {
        let odd = sandbox.path("odd")
        try FileManager.default.createDirectory(atPath: odd + "/store.tinystorage", withIntermediateDirectories: true)
        try sandbox.run("verify", odd).expectFailure(
            9, "the store '\(odd)' is not safe to use: '\(odd)/store.tinystorage' is a directory")
    }
}
