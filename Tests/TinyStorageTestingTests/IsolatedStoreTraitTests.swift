import Foundation
import Testing
import TinyStorage
import TinyStorageTesting

// Issue 33, item 4: the `.isolatedStore` trait, used as a test uses it.

/// The directories earlier cases of `eachCaseGetsItsOwnStore` had, in the order they ran.
private let earlierCaseDirectories = Box<URL>()

@Suite struct IsolatedStoreTraitTests {
    @Test(.isolatedStore) func aTestGetsAnEmptyStoreInANewPrivateDirectoryThatExistsWhileItRuns() throws {
        let storage = TinyStorage.testStore
        let directory = TinyStorage.testStoreDirectory
        #expect(storage === TinyStorage.testStore)
        #expect(storage.availability.isAvailable)
        #expect(storage.allKeys.isEmpty)
        #expect(
            directory.deletingLastPathComponent().standardizedFileURL.path
                == FileManager.default.temporaryDirectory.standardizedFileURL.path)
        #expect(storage.fileURL.path.hasPrefix(directory.path + "/store/"))
        let attributes = try FileManager.default.attributesOfItem(atPath: directory.path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o700)

        try storage.storeOrThrow(364, forKey: "streak")
        #expect(FileManager.default.fileExists(atPath: storage.fileURL.path))
        let relaunched = TinyStorage(insideDirectory: directory, name: "store")
        #expect(try relaunched.retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
    }

    /// Serialized, so each case starts after the one before ended: a store shared between
    /// cases, or a directory left behind, shows.
    @Test(.serialized, .isolatedStore, arguments: 1...3)
    func eachCaseGetsItsOwnStoreAndTheCaseBeforeLeftNoDirectory(value: Int) throws {
        let storage = TinyStorage.testStore
        let directory = TinyStorage.testStoreDirectory
        #expect(storage.allKeys.isEmpty, "case \(value) sees \(storage.allKeys.map(\.rawValue))")
        for earlier in earlierCaseDirectories.all {
            #expect(earlier != directory)
            #expect(!FileManager.default.fileExists(atPath: earlier.path), "\(earlier.path) is left behind")
        }
        try storage.storeOrThrow(value, forKey: "case")
        earlierCaseDirectories.append(directory)
    }

    @Test(.isolatedStore(in: .memory)) func aStoreInMemoryTouchesNoFileAndHasNoDirectory() throws {
        let storage = TinyStorage.testStore
        #expect(storage.allKeys.isEmpty)
        try storage.storeOrThrow(364, forKey: "streak")
        #expect(storage.integer(forKey: "streak") == 364)
        #expect(!FileManager.default.fileExists(atPath: storage.fileURL.path))
        withKnownIssue {
            _ = TinyStorage.testStoreDirectory
        } matching: { issue in
            issue.comments.contains { $0.rawValue.contains("is in memory") }
        }
    }

    @Test func readingTheStoreOutsideTheTraitRecordsAnIssueSayingWhatToDo() throws {
        withKnownIssue {
            let storage = TinyStorage.testStore
            storage.store(1, forKey: "k")  // a store that works, so the test can go on
            #expect(storage.integer(forKey: "k") == 1)
        } matching: { issue in
            issue.comments.contains { $0.rawValue.contains("@Test(.isolatedStore)") }
        }
        withKnownIssue {
            let directory = TinyStorage.testStoreDirectory
            let storage = TinyStorage(insideDirectory: directory, name: "store", logger: SilentLogger())
            #expect(!storage.availability.isAvailable)
        } matching: { issue in
            issue.comments.contains { $0.rawValue.contains("outside a test with the isolatedStore trait") }
        }
    }
}

/// Every test of a suite with the trait gets a store of its own, seeded, even one read by the
/// suite's initializer. Serialized, so a store shared between the tests shows.
@Suite(
    .serialized,
    .isolatedStore(name: "settings", seed: { storage in try storage.storeOrThrow(364, forKey: "streak") }))
struct SeededSuiteTests {
    let storage = TinyStorage.testStore

    func checkAndTouch() throws {
        #expect(storage === TinyStorage.testStore)
        #expect(storage.fileURL.path.hasPrefix(TinyStorage.testStoreDirectory.path + "/settings/"))
        #expect(storage.integer(forKey: "streak") == 364)
        #expect(!storage.contains("touched"), "a store shared with the other test")
        try storage.storeOrThrow(true, forKey: "touched")
    }

    @Test func first() throws { try checkAndTouch() }
    @Test func second() throws { try checkAndTouch() }
}
