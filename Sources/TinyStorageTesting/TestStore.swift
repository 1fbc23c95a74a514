public import Foundation
import Testing
public import TinyStorage

/// The store a test case was given by ``IsolatedStoreTrait``, handed over in a task-local value.
struct TestStore: Sendable {
    /// The store of the running test case, or `nil` outside ``IsolatedStoreTrait``'s scope.
    @TaskLocal static var current: TestStore?

    var storage: TinyStorage
    /// The directory the store was opened in, or `nil` for a store in memory.
    var directory: URL?

    /// Where nothing can be created: a store opened there is unavailable, never written.
    static let nowhere = URL(fileURLWithPath: "/dev/null/tinystorage-no-test-store", isDirectory: true)
}

extension TinyStorage {
    /// The running test case's own store, given by the ``IsolatedStoreTrait`` trait.
    ///
    /// ```swift
    /// @Test(.isolatedStore) func aNewStoreIsEmpty() {
    ///     #expect(TinyStorage.testStore.allKeys.isEmpty)
    /// }
    /// ```
    ///
    /// Each read in one test case returns the same instance. Outside a test case with the trait
    /// (or in a `Task.detached` or on a dispatch queue, which do not inherit task-local values),
    /// it records an issue saying so, which fails the test, and returns a new, empty in-memory
    /// store so the test can go on.
    public static var testStore: TinyStorage {
        if let current = TestStore.current { return current.storage }
        Issue.record(
            """
            TinyStorage.testStore was read outside a test with the isolatedStore trait: add it, \
            as in @Test(.isolatedStore), or @Suite(.isolatedStore) for every test of a suite \
            (a Task.detached or a dispatch queue does not see it: read it in the test and pass it on)
            """)
        return .inMemory(name: "no-test-store")
    }

    /// The directory the running test case's store was opened in: a new folder under the
    /// temporary directory, removed with everything in it once the test case ends.
    ///
    /// Open another instance of the test's store there, as a relaunched app or another process
    /// would (the trait's default name is `"store"`):
    ///
    /// ```swift
    /// @Test(.isolatedStore) func theStreakSurvivesARelaunch() throws {
    ///     TinyStorage.testStore.store(364, forKey: "streak")
    ///     let relaunched = TinyStorage(insideDirectory: TinyStorage.testStoreDirectory, name: "store")
    ///     #expect(try relaunched.retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
    /// }
    /// ```
    ///
    /// For a store in memory (`.isolatedStore(in: .memory)`), or outside a test case with the
    /// trait, it records an issue saying so, which fails the test, and returns a path where
    /// nothing can be created (a store opened there is unavailable).
    public static var testStoreDirectory: URL {
        guard let current = TestStore.current else {
            Issue.record(
                """
                TinyStorage.testStoreDirectory was read outside a test with the isolatedStore trait: \
                add it, as in @Test(.isolatedStore)
                """)
            return TestStore.nowhere
        }
        guard let directory = current.directory else {
            Issue.record(
                """
                TinyStorage.testStoreDirectory was read in a test whose store is in memory \
                (.isolatedStore(in: .memory)): it has no directory; use .isolatedStore for real files
                """)
            return TestStore.nowhere
        }
        return directory
    }
}
