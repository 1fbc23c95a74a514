import Foundation
import Testing
import TinyStorage

/// `compact` shrinks a log of many overwrites and keeps every value.
@Suite struct CLICompactTests {
    let sandbox: CLISandbox
    let store: String

    init() throws {
        sandbox = try CLISandbox()
        store = sandbox.path("settings")
    }

    @Test func compactShrinksAStoreWithManyOverwritesAndKeepsItsValues() throws {
        let storage = TinyStorage(insideDirectory: sandbox.root, name: "settings")
        for count in 1...300 {
            try storage.storeOrThrow(count, forKey: "launches")
        }
        try storage.storeOrThrow("Ada", forKey: "name")
        try storage.storeOrThrow(["a", "b"], forKey: "tags")
        let before = try #require(sandbox.dataFile(store))
        let export = try sandbox.run("export", store).output

        let result = try sandbox.run("compact", store)
        result.expectSuccess()
        let after = try #require(sandbox.dataFile(store))
        #expect(after.count * 10 < before.count, "\(before.count) bytes became \(after.count)")
        #expect(result.output.hasPrefix("compacted '\(store)' (3 keys, values unchanged)\n"))
        let (logBefore, logAfter) = (DataFileBytes.logicalEnd(before), DataFileBytes.logicalEnd(after))
        #expect(result.output.contains("before: \(logBefore) bytes of records in a \(before.count)-byte file\n"))
        #expect(result.output.contains("after:  \(logAfter) bytes of records in a \(after.count)-byte file\n"))
        #expect(try sandbox.run("export", store).output == export)
        try sandbox.run("verify", store).expectSuccess()
        // The instance that was open during the compaction reads and writes on.
        #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "launches") == 300)
        try storage.storeOrThrow(301, forKey: "launches")
        #expect(try sandbox.run("read", store, "launches").output == "301\n")
    }

    @Test func compactRefusesAPathThatIsNotAStore() throws {
        let missing = sandbox.path("missing")
        try sandbox.run("compact", missing).expectFailure(
            3, "'\(missing)' is not a TinyStorage store (it does not exist)")
        #expect(!sandbox.exists(missing))
    }

    @Test func compactLeavesAStoreFromANewerTinyStorageUntouched() throws {
        try sandbox.run("write", store, "streak", "365").expectSuccess()
        let file = URL(fileURLWithPath: store + "/store.tinystorage")
        try DataFileBytes.header(try Data(contentsOf: file), withVersion: 99).write(to: file)
        let before = sandbox.snapshot(store)
        try sandbox.run("compact", store).expectFailure(4, "the store '\(store)' cannot be read (unsupportedFormat)")
        #expect(sandbox.snapshot(store) == before)
    }
}
