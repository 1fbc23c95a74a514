import Foundation
import Testing
import TinyStorage

/// `backup` writes a consistent copy of a store in use, which every command and the library open
/// as a store; it never writes into a store, and refuses bad input with the help's exit codes.
@Suite struct CLIBackupTests {
    let sandbox: CLISandbox
    let store: String

    init() throws {
        sandbox = try CLISandbox()
        store = sandbox.path("settings")
    }

    @Test func aBackupOfAStoreInUseHoldsEveryValueAndOpensAsAStore() throws {
        let storage = TinyStorage(insideDirectory: sandbox.root, name: "settings")
        for count in 1...200 { try storage.storeOrThrow(count, forKey: "launches") }
        try storage.storeOrThrow("Ada", forKey: "name")
        let backup = sandbox.path("backups/2026-11-28")

        let result = try sandbox.run("backup", store, backup)
        result.expectSuccess()
        #expect(result.output == "backed up '\(store)' to '\(backup)' (2 keys, verified)\n")
        #expect(try sandbox.run("export", backup).output == (try sandbox.run("export", store).output))
        try sandbox.run("verify", backup).expectSuccess()
        #expect(try FileManager.default.contentsOfDirectory(atPath: backup) == ["store.tinystorage"])
        // The store goes on, and the backup is a store of its own.
        try storage.storeOrThrow(201, forKey: "launches")
        #expect(try sandbox.run("read", backup, "launches").output == "200\n")
        let restored = TinyStorage(insideDirectory: sandbox.root.appendingPathComponent("backups"), name: "2026-11-28")
        #expect(try restored.retrieveOrThrow(type: String.self, forKey: "name") == "Ada")
    }

    /// The reproduction by hand: `store.lock` copied, more writes, `store.tinystorage`
    /// copied, the copies put back while nothing has the store open. Every key is there, and the
    /// next write lands after them.
    @Test func aCopyTakenWhileInUseLosesNothingToTheNextWrite() throws {
        for index in 1...5 { try sandbox.run("write", store, "k\(index)", "\(index)").expectSuccess() }
        let lock = try Data(contentsOf: URL(fileURLWithPath: store + "/store.lock"))
        for index in 6...10 { try sandbox.run("write", store, "k\(index)", "\(index)").expectSuccess() }
        let data = try #require(sandbox.dataFile(store))
        try FileManager.default.removeItem(atPath: store)
        try FileManager.default.createDirectory(
            atPath: store, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        try lock.write(to: URL(fileURLWithPath: store + "/store.lock"))
        try data.write(to: URL(fileURLWithPath: store + "/store.tinystorage"))

        let keys = (1...10).map { "k\($0)" }.sorted()
        #expect(try sandbox.run("keys", store).output == keys.joined(separator: "\n") + "\n")
        try sandbox.run("write", store, "new", "1").expectSuccess()
        #expect(try sandbox.run("keys", store).output == (keys + ["new"]).sorted().joined(separator: "\n") + "\n")
        try sandbox.run("verify", store).expectSuccess()
    }

    @Test func aBackupNeverWritesIntoAStore() throws {
        try sandbox.run("write", store, "streak", "365").expectSuccess()
        let other = sandbox.path("other")
        try sandbox.run("write", other, "streak", "1").expectSuccess()
        let before = sandbox.snapshot(other)
        try sandbox.run("backup", store, other).expectFailure(5, "'\(other)' already holds a store")
        #expect(sandbox.snapshot(other) == before)
        #expect(try sandbox.run("read", other, "streak").output == "1\n")
    }

    @Test func aBackupOfAPathThatIsNotAStoreIsRefused() throws {
        let missing = sandbox.path("missing")
        let backup = sandbox.path("backup")
        try sandbox.run("backup", missing, backup).expectFailure(
            3, "'\(missing)' is not a TinyStorage store (it does not exist)")
        #expect(!sandbox.exists(missing))
        #expect(!sandbox.exists(backup))
        #expect(try sandbox.run("backup", store).status == 64, "no backup directory: a usage error")
    }
}
