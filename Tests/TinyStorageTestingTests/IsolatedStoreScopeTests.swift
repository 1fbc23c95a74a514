import Foundation
import Testing
import TinyStorage
import TinyStorageTesting

// The trait's scope, called directly, so a test can look at what it leaves once it ends.

/// Runs `body` in `trait`'s scope, as Swift Testing runs a test case with the trait.
private func runInScope(
    _ trait: IsolatedStoreTrait, _ body: @escaping @Sendable () async throws -> Void
) async throws {
    let test = try #require(Test.current)
    try await trait.provideScope(for: test, testCase: Test.Case.current, performing: body)
}

@Suite struct IsolatedStoreScopeTests {
    @Test func theDirectoryExistsWhileTheTestRunsAndIsGoneOnceItReturns() async throws {
        let seen = Box<URL>()
        try await runInScope(.isolatedStore) {
            let directory = TinyStorage.testStoreDirectory
            #expect(FileManager.default.fileExists(atPath: directory.path))
            try TinyStorage.testStore.storeOrThrow(364, forKey: "streak")
            #expect(FileManager.default.fileExists(atPath: TinyStorage.testStore.fileURL.path))
            seen.append(directory)
        }
        let directory = try #require(seen.all.first)
        #expect(!FileManager.default.fileExists(atPath: directory.path))
    }

    @Test func theDirectoryIsGoneOnceATestThrows() async throws {
        let seen = Box<URL>()
        await #expect(throws: Boom.self) {
            try await runInScope(.isolatedStore) {
                seen.append(TinyStorage.testStoreDirectory)
                try TinyStorage.testStore.storeOrThrow(364, forKey: "streak")
                throw Boom()
            }
        }
        let directory = try #require(seen.all.first)
        #expect(!FileManager.default.fileExists(atPath: directory.path))
    }

    /// Both scopes are open at once (each waits for the other after writing): each reads back
    /// its own value, from its own directory.
    @Test(arguments: [IsolatedStoreTrait.Medium.temporaryDirectory, .memory])
    func twoTestsRunningAtOnceGetStoresOfTheirOwn(medium: IsolatedStoreTrait.Medium) async throws {
        let rendezvous = Rendezvous(count: 2)
        let stores = Box<TinyStorage>()
        let directories = Box<URL>()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for owner in ["a", "b"] {
                group.addTask {
                    try await runInScope(.isolatedStore(in: medium)) {
                        let storage = TinyStorage.testStore
                        stores.append(storage)
                        if medium == .temporaryDirectory { directories.append(TinyStorage.testStoreDirectory) }
                        #expect(storage.allKeys.isEmpty)
                        try storage.storeOrThrow(owner, forKey: "owner")
                        await rendezvous.arrive()
                        #expect(storage.retrieve(type: String.self, forKey: "owner") == owner)
                        #expect(storage.allKeys.count == 1)
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(stores.all.count == 2)
        #expect(stores.all.first !== stores.all.last)
        if medium == .temporaryDirectory {
            #expect(Set(directories.all).count == 2)
            for directory in directories.all { #expect(!FileManager.default.fileExists(atPath: directory.path)) }
        }
    }

    /// The seed's commits are announced before the test starts: an observer the test adds hears
    /// only the test's own commit (were the seed's still on their way, they would come first).
    @Test(arguments: [IsolatedStoreTrait.Medium.temporaryDirectory, .memory])
    func theSeedIsThereWhenTheTestStartsAndItsAnnouncementsAreOver(medium: IsolatedStoreTrait.Medium) async throws {
        let trait = IsolatedStoreTrait.isolatedStore(in: medium) { storage in
            for day in 1...20 { try storage.storeOrThrow(day, forKey: "day\(day)") }
            try storage.storeOrThrow(364, forKey: "streak")
        }
        try await runInScope(trait) {
            let storage = TinyStorage.testStore
            #expect(storage.integer(forKey: "streak") == 364)
            let (announced, continuation) = AsyncStream<[String]>.makeStream()
            let observer = NotificationCenter.default.addObserver(
                forName: TinyStorage.didChangeNotification, object: storage, queue: nil
            ) { notification in
                continuation.yield(notification.userInfo?[TinyStorage.changedKeysUserInfoKey] as? [String] ?? [])
            }
            defer { NotificationCenter.default.removeObserver(observer) }
            try storage.storeOrThrow(true, forKey: "marker")
            var heard: [[String]] = []
            for await keys in announced {
                heard.append(keys)
                if keys == ["marker"] { break }
            }
            #expect(heard == [["marker"]])
        }
    }

    @Test func aSeedThatThrowsFailsTheTestWhichDoesNotRunAndLeavesNoDirectory() async throws {
        let seeded = Box<URL>()
        let ran = Box<Bool>()
        let trait = IsolatedStoreTrait.isolatedStore { storage in
            seeded.append(storage.fileURL)
            throw Boom()
        }
        await #expect(throws: Boom.self) {
            try await runInScope(trait) { ran.append(true) }
        }
        #expect(ran.all.isEmpty)
        let fileURL = try #require(seeded.all.first)
        let directory = fileURL.deletingLastPathComponent().deletingLastPathComponent()
        #expect(!FileManager.default.fileExists(atPath: directory.path))
    }

    @Test func anInvalidNameFailsWithInvalidNameAndLeavesNoDirectory() async throws {
        let ran = Box<Bool>()
        // NB: compared with what was there before: a broken run may have left one behind.
        let before = try temporaryEntries(containing: "anInvalidNameFailsWithInvalidName")
        let error = await #expect(throws: TinyStorageError.self) {
            try await runInScope(.isolatedStore(name: "a/b")) { ran.append(true) }
        }
        #expect(error?.code == .invalidName)
        #expect(ran.all.isEmpty)
        #expect(try temporaryEntries(containing: "anInvalidNameFailsWithInvalidName") == before)
    }

    @Test func aDirectoryTheTestRemovedItselfIsNoIssue() async throws {
        try await runInScope(.isolatedStore) {
            try TinyStorage.testStore.storeOrThrow(1, forKey: "k")
            try FileManager.default.removeItem(at: TinyStorage.testStoreDirectory)
        }
    }
}
