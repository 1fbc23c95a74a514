import Foundation
import Testing

@testable import TinyStorage

/// The sentinel-guarded migration: refuses an empty-looking source, commits once, reports every key.
/// NB: a time limit per test: a regression here waits forever (a spin or a `for await` on a
/// marker that never comes), and should fail the test, not stall the run (tests-audit N11).
@Suite(.timeLimit(.minutes(1))) struct SafeMigrationTests {
    @Test func aMissingSentinelRefusesAndWritesNothing() throws {
        try withUserDefaultsSuite { suite throws in
            let defaults = try fillUserDefaults(suite, ["streak": 365, "onboarded": true])
            try withTemporaryDirectory { directory throws in
                let storage = openStore(directory)
                storage.store(12, forKey: "streak")
                let entries = try storage.rawJSON()
                let size = try committedLength(storage.fileURL)

                let error = expectError(.migrationRefused) {
                    try storage.migrate(
                        userDefaults: defaults, nonBoolKeys: ["streak"], boolKeys: ["onboarded"],
                        requiring: "hasLaunchedBefore", overwriteTinyStorageIfConflict: true)
                }
                #expect(error?.key == "hasLaunchedBefore")
                #expect(try storage.rawJSON() == entries)
                #expect(try committedLength(storage.fileURL) == size)
                #expect(try openStore(directory).rawJSON() == entries)
            }
        }
    }

    @Test func anEmptyLookingSourceIsRefused() throws {
        try withUserDefaultsSuite { suite throws in
            // What an unavailable UserDefaults looks like: nothing at all.
            let defaults = try #require(UserDefaults(suiteName: suite))
            try withTemporaryDirectory { directory throws in
                let storage = openStore(directory)
                var caught = false
                do {
                    _ = try storage.migrate(
                        userDefaults: defaults, nonBoolKeys: ["streak"], boolKeys: [], requiring: "hasLaunchedBefore")
                } catch TinyStorageError.Code.migrationRefused {
                    caught = true
                }
                #expect(caught)
                #expect(try storage.rawJSON().isEmpty)
            }
        }
    }

    @Test func aPresentSentinelMigratesEverythingInOneCommit() async throws {
        let suite = "TinyStorageMigrationTests-\(UUID().uuidString)"
        let writer = try #require(UserDefaults(suiteName: suite))
        defer { writer.removePersistentDomain(forName: suite) }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("TinyStorageTests-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        let defaults = try fillUserDefaults(
            suite, ["hasLaunchedBefore": true, "streak": 365, "name": "ada", "tags": ["a"], "onboarded": true])
        let storage = openStore(directory)
        let changes = storage.rawChanges()
        let writeID = UUID().uuidString
        let report = try storage.migrate(
            userDefaults: defaults, nonBoolKeys: ["streak", "name", "tags", "missing"], boolKeys: ["onboarded"],
            requiring: "hasLaunchedBefore", writeID: writeID)
        storage.store(true, forKey: "marker")

        var commits: [TinyStorage.RawChange] = []
        for await change in changes {
            if change.keys == ["marker"] { break }
            commits.append(change)
        }
        #expect(commits.count == 1)
        #expect(Set(commits.first?.keys ?? []) == ["onboarded", "streak", "name", "tags"])
        #expect(commits.first?.writeID == writeID)
        #expect(report.migrated == ["onboarded", "streak", "name", "tags"])
        #expect(report.skipped == ["missing": .absent])
        // The sentinel is only checked, not migrated.
        #expect(!storage.contains("hasLaunchedBefore"))
    }

    @Test func theReportPutsEveryKeyInExactlyOneBucketAndNeverPrintsValues() throws {
        try withUserDefaultsSuite { suite throws in
            let defaults = try fillUserDefaults(
                suite,
                [
                    "sentinel": true, "secret": "hunter2-secret", "kept": "from-defaults", "nested": [[1]],
                    "flag": "not-a-bool",
                ])
            try withTemporaryDirectory { directory throws in
                let logger = TestLogger()
                let storage = openStore(directory, logger: logger)
                storage.store("already-here", forKey: "kept")
                let requested = ["secret", "kept", "nested", "absent"]
                let report = try storage.migrate(
                    userDefaults: defaults, nonBoolKeys: requested, boolKeys: ["flag"], requiring: "sentinel")

                #expect(report.migrated == ["secret"])
                #expect(report.skipped == ["kept": .conflictKept, "absent": .absent])
                #expect(report.failed == ["nested": .nestedCollection, "flag": .notABool])
                let buckets = report.migrated + Array(report.skipped.keys) + Array(report.failed.keys)
                #expect(buckets.sorted() == (requested + ["flag"]).sorted())
                #expect(storage.retrieve(type: String.self, forKey: "kept") == "already-here")

                let printed = [report.description] + logger.messages.withLock { $0.map(\.text) }
                #expect(report.description.contains("nested (nestedCollection)"))
                for text in printed {
                    #expect(!text.contains("hunter2-secret"))
                    #expect(!text.contains("from-defaults"))
                }
                #expect(
                    report
                        == TinyStorage.MigrationReport(
                            migrated: ["secret"], skipped: ["kept": .conflictKept, "absent": .absent],
                            failed: ["nested": .nestedCollection, "flag": .notABool]))
            }
        }
    }
}
