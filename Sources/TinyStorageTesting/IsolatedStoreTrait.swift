import Foundation
public import Testing
public import TinyStorage

/// A Swift Testing trait that gives each test its own empty store, and removes it afterwards.
///
/// ```swift
/// import Testing
/// import TinyStorage
/// import TinyStorageTesting
///
/// @Test(.isolatedStore) func completingADayExtendsTheStreak() throws {
///     let storage = TinyStorage.testStore
///     storage.store(364, forKey: "streak")
///     try storage.update("streak", as: Int.self) { $0 = ($0 ?? 0) + 1 }
///     #expect(storage.retrieve(type: Int.self, forKey: "streak") == 365)
/// }
/// ```
///
/// Each test case — each argument of a parameterized test, each test of a suite that has the
/// trait — gets a store of its own, in a new directory under the temporary directory (or in
/// memory), so tests running in parallel never see each other's values. Read it with
/// ``TinyStorage/TinyStorage/testStore``, and its directory with
/// ``TinyStorage/TinyStorage/testStoreDirectory``. Once the test case ends — returning,
/// throwing or failing an expectation — the store is flushed and its directory removed.
///
/// The store is handed over in a task-local value: the test's task and the tasks it creates
/// (`async let`, task groups, `Task { }`) see it; a `Task.detached` and work on a dispatch queue
/// do not. Read it in the test and pass it to the code under test.
public struct IsolatedStoreTrait: TestTrait, SuiteTrait, TestScoping {
    /// Where an isolated store keeps its values.
    public enum Medium: Sendable, Equatable {
        /// Real files in a new directory under the temporary directory, removed afterwards: for
        /// tests of persistence, of several instances or processes sharing a store.
        case temporaryDirectory
        /// No file at all, like ``TinyStorage/TinyStorage/inMemory(name:notificationQueue:logger:)``.
        case memory
    }

    /// The store's name: its folder inside ``TinyStorage/TinyStorage/testStoreDirectory``.
    public let name: String
    /// Where the store keeps its values.
    public let medium: Medium
    /// Writes the values every test case starts with, before the test runs.
    let seed: (@Sendable (TinyStorage) async throws -> Void)?

    /// On a suite, every test in it (and in nested suites) gets a store of its own.
    public var isRecursive: Bool { true }

    /// A scope per test case, never one around a whole suite or a whole parameterized test:
    /// stores are never shared.
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self
    }

    /// Opens the test case's store, seeds it, runs the test case with it, then flushes the store
    /// and removes its directory, whether the test case returned or threw.
    ///
    /// - Throws: What the test case throws; what the seed throws (the test case does not run);
    ///   the store's ``TinyStorage/TinyStorageError`` when it cannot be opened (an invalid
    ///   ``name``: `.invalidName`); a file-system error when the directory cannot be created.
    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        switch medium {
        case .memory:
            let storage = TinyStorage.inMemory(name: name)
            try await run(function, with: TestStore(storage: storage, directory: nil))
        case .temporaryDirectory:
            let directory = try TestStoreDirectory(for: test)
            let storage = TinyStorage(insideDirectory: directory.url, name: name)
            var failure: (any Error)?
            do {
                try await run(function, with: TestStore(storage: storage, directory: directory.url))
            } catch {
                failure = error
            }
            await storage.finishBackgroundWork()
            directory.remove()
            if let failure { throw failure }
        }
    }

    /// Checks and seeds the store, then runs `function` with it in the task-local value.
    private func run(_ function: @Sendable () async throws -> Void, with store: TestStore) async throws {
        if case .unavailable(let error) = store.storage.availability { throw error }
        if let seed {
            try await seed(store.storage)
            // NB: the seed's commits are announced on the main queue a moment later; a test
            // that observes the store from its first line must not hear of them.
            await store.storage.waitUntilAnnounced()
        }
        try await TestStore.$current.withValue(store) { try await function() }
    }
}

extension Trait where Self == IsolatedStoreTrait {
    /// Gives each test case its own empty store named `"store"` in a new temporary directory,
    /// removed afterwards. Read it with ``TinyStorage/TinyStorage/testStore``.
    ///
    /// ```swift
    /// @Test(.isolatedStore) func theStreakStartsAtZero() {
    ///     #expect(TinyStorage.testStore[.streak] == 0)
    /// }
    /// ```
    public static var isolatedStore: Self { isolatedStore() }

    /// Gives each test case its own store named `name`, in a new temporary directory or in
    /// memory, holding what `seed` writes before the test case runs.
    ///
    /// ```swift
    /// @Suite(.isolatedStore(name: "settings", seed: { try $0.storeOrThrow(364, forKey: "streak") }))
    /// struct StreakTests {
    ///     let storage = TinyStorage.testStore  // one per test
    ///
    ///     @Test func theStreakIsRead() { #expect(storage.integer(forKey: "streak") == 364) }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - name: The store's name (its folder inside ``TinyStorage/TinyStorage/testStoreDirectory``).
    ///   - medium: `.temporaryDirectory` (real files, the default) or `.memory`.
    ///   - seed: Writes the values each test case starts with. Its commits are announced before
    ///     the test case starts, so an observer the test adds hears none of them. When it throws,
    ///     the test case fails with that error and does not run.
    public static func isolatedStore(
        name: String = "store", in medium: IsolatedStoreTrait.Medium = .temporaryDirectory,
        seed: (@Sendable (TinyStorage) async throws -> Void)? = nil
    ) -> Self {
        IsolatedStoreTrait(name: name, medium: medium, seed: seed)
    }
}
