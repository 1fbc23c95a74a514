import Foundation
import Testing

@testable import TinyStorage

/// A store opened a moment ago answers reads from the file as it was read and checked, before its
/// index is built (in the background, or by the first use that needs it), and answers exactly
/// what the built index answers.
@Suite struct PendingIndexTests {
    /// Runs `body` while no index is built in the background: the queue that builds them is held
    /// until `body` returns.
    func withIndexBuildsHeld<R>(_ body: () throws -> R) throws -> R {
        let release = hold(BackgroundScheduler.indexBuildQueue)
        defer { release() }
        return try body()
    }

    func isIndexBuilt(_ storage: TinyStorage) -> Bool {
        storage.engine.state.withLock { $0.index.pending == nil }
    }

    struct Profile: Codable, Equatable, Sendable {
        var name: String
        var age: Int
    }

    /// Puts, overwrites, removals, a clear, and every kind of value, in several records.
    func fill(_ storage: TinyStorage) throws {
        try storage.storeOrThrow(1, forKey: "cleared")
        try storage.storeOrThrow("gone", forKey: "removed")
        storage.reset()
        try storage.storeOrThrow(1, forKey: "count")
        try storage.storeOrThrow(2, forKey: "count")
        try storage.storeOrThrow(Profile(name: "Ada", age: 36), forKey: "profile")
        try storage.storeOrThrow(Data([0, 1, 0xFF]), forKey: "blob")
        try storage.storeOrThrow("temporary", forKey: "removed")
        try storage.storeOrThrow(nil, forKey: "removed")
        try storage.storeRawJSON(["a": Data("\"one\"".utf8), "b": Data("[2]".utf8)])
    }

    func expectFilledValues(_ storage: TinyStorage, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "count") == 2, sourceLocation: sourceLocation)
        #expect(
            try storage.retrieveOrThrow(type: Profile.self, forKey: "profile") == Profile(name: "Ada", age: 36),
            sourceLocation: sourceLocation)
        #expect(
            try storage.retrieveOrThrow(type: Data.self, forKey: "blob") == Data([0, 1, 0xFF]),
            sourceLocation: sourceLocation)
        #expect(try storage.retrieveOrThrow(type: String.self, forKey: "a") == "one", sourceLocation: sourceLocation)
        #expect(try storage.retrieveOrThrow(type: [Int].self, forKey: "b") == [2], sourceLocation: sourceLocation)
        #expect(
            try storage.retrieveOrThrow(type: String.self, forKey: "removed") == nil, sourceLocation: sourceLocation)
        #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "cleared") == nil, sourceLocation: sourceLocation)
        #expect(
            try storage.retrieveOrThrow(type: Int.self, forKey: "never stored") == nil, sourceLocation: sourceLocation)
    }

    @Test func readsBeforeTheIndexIsBuiltAnswerWhatTheBuiltIndexAnswers() throws {
        try withTemporaryDirectory { directory throws in
            try fill(openStore(directory))
            let storage = try withIndexBuildsHeld {
                let storage = openStore(directory)
                #expect(!isIndexBuilt(storage), "the index was built at the open")
                try expectFilledValues(storage)
                try expectFilledValues(storage)  // nothing was cached from the file as read
                #expect(!isIndexBuilt(storage), "a read built the index")
                return storage
            }
            BackgroundScheduler.indexBuildQueue.sync {}
            #expect(isIndexBuilt(storage), "the background build never put the index in place")
            try expectFilledValues(storage)
            try expectFilledValues(storage)  // the second time from the cache
            #expect(Set(storage.allKeys.map(\.rawValue)) == ["count", "profile", "blob", "a", "b"])
        }
    }

    @Test func aCommitBeforeTheIndexIsBuiltBuildsItFirst() throws {
        try withTemporaryDirectory { directory throws in
            try fill(openStore(directory))
            let storage = try withIndexBuildsHeld {
                let storage = openStore(directory)
                try storage.storeOrThrow(3, forKey: "count")
                #expect(isIndexBuilt(storage))
                return storage
            }
            BackgroundScheduler.indexBuildQueue.sync {}
            #expect(storage.integer(forKey: "count") == 3)
            storage.engine.state.withLock { state in
                #expect(state.index.built.count == 5)
                let live = state.index.built.reduce(LogFormat.headerSize) {
                    $0 + LogCommit.putRecordSize(keyLength: $1.key.utf8.count, valueLength: $1.value.bytes.count)
                }
                #expect(state.index.builtLiveBytes == live)
            }
            let reopened = openStore(directory)
            #expect(reopened.integer(forKey: "count") == 3)
            #expect(Set(reopened.allKeys.map(\.rawValue)) == ["count", "profile", "blob", "a", "b"])
        }
    }

    @Test func anotherInstancesCommitBeforeTheIndexIsBuiltIsRead() throws {
        try withTemporaryDirectory { directory throws in
            try fill(openStore(directory))
            try withIndexBuildsHeld {
                let storage = openStore(directory)
                try openStore(directory).storeOrThrow(7, forKey: "count")
                #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "count") == 7)
                try expectFilledValues(openStore(directory), expectingCount: 7)
            }
        }
    }

    @Test func aStoreWithMoreOperationsThanAWalkBuildsItsIndexAtTheOpen() throws {
        try withTemporaryDirectory { directory throws in
            let count = PendingIndex.walkLimit + 10
            try openStore(directory).storeRaw(
                Dictionary(
                    uniqueKeysWithValues: (0..<count).map { ("k\($0)", StoredValue(Data("\($0)".utf8), kind: .json)) }))
            try withIndexBuildsHeld {
                let storage = openStore(directory)
                #expect(isIndexBuilt(storage))
                #expect(storage.integer(forKey: "k4000") == 4_000)
            }
        }
    }
}

extension PendingIndexTests {
    func expectFilledValues(_ storage: TinyStorage, expectingCount count: Int) throws {
        #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "count") == count)
        #expect(try storage.retrieveOrThrow(type: String.self, forKey: "removed") == nil)
    }
}
