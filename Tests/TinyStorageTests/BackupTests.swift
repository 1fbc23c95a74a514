import Foundation
import Testing

@testable import TinyStorage

/// `backup(to:)`: a consistent, verified copy of a store in use, as a store folder of its own.
@Suite struct BackupTests {
    @Test func aBackupHoldsWhatTheStoreHeldAfterEveryInstancesCommits() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let other = openStore(directory)
            for index in 0..<50 { try storage.storeOrThrow(index, forKey: "k\(index % 7)") }
            try other.storeOrThrow("from the other", forKey: "other")
            let backup = directory.appendingPathComponent("backups/settings")
            try storage.backup(to: backup)

            let inspection = try TinyStorage.inspect(storeDirectory: backup)
            #expect(inspection.isHealthy)
            #expect(try storage.rawJSON() == openStore(backup.deletingLastPathComponent(), name: "settings").rawJSON())
            #expect(inspection.entries["other"] != nil, "another instance's commit, caught up first")
            #expect(try permissions(backup) == 0o700)
            #expect(try permissions(backup.appendingPathComponent("store.tinystorage")) == 0o600)
        }
    }

    @Test func aBackupNeverReplacesAStoreAndBadDestinationsAreRefused() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow(364, forKey: "streak")
            let existing = openStore(directory, name: "existing")
            try existing.storeOrThrow(1, forKey: "streak")
            let before = try Data(contentsOf: existing.fileURL)
            let error = expectError(.io) { try storage.backup(to: existing.directoryURL) }
            #expect(error?.message.contains("already holds a store") == true)
            #expect(try Data(contentsOf: existing.fileURL) == before)
            expectError(.invalidName) { try storage.backup(to: URL(fileURLWithPath: "/")) }
            let link = directory.appendingPathComponent("link")
            try FileManager.default.createSymbolicLink(at: link, withDestinationURL: directory)
            expectError(.unsafeFile) { try storage.backup(to: link) }
        }
    }

    @Test func aStoreThatCannotBeReadIsNotBackedUp() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(
                directory, io: FileIO(injectFault: failing(.open, Errno(EACCES), pathEndingIn: "store.tinystorage")))
            let backup = directory.appendingPathComponent("backup")
            expectError(.unavailable) { try storage.backup(to: backup) }
            #expect(!FileManager.default.fileExists(atPath: backup.path))
        }
    }
}
