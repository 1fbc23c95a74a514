import Foundation
import Testing

@testable import TinyStorage

enum LimitedGroup: String, TinyStorageKeyGroup { case note }

/// `statistics` (what a store holds, by size) and `sizeLimit` (a write that would grow the store
/// past it throws and writes nothing): issue 33, item 5.
@Suite struct StatisticsTests {
    /// The size of a key's record in a compacted file, for a value of `valueLength` bytes.
    static func recordSize(_ key: String, _ valueLength: Int) -> Int {
        LogCommit.putRecordSize(keyLength: key.utf8.count, valueLength: valueLength)
    }

    @Test func statisticsCountKeysLiveBytesAndTheLargestKeysInOrder() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            #expect(
                try storage.statistics
                    == .init(
                        fileSize: storage.statistics.fileSize, liveBytes: LogFormat.headerSize, keyCount: 0,
                        largestKeys: []))
            // k1…k11 hold strings whose JSON takes 2 to 12 bytes ("", "x", …); a11 is as large as k10.
            for length in 1...11 {
                try storage.storeOrThrow(String(repeating: "x", count: length - 1), forKey: "k\(length)")
            }
            try storage.storeOrThrow(String(repeating: "y", count: 9), forKey: "a11")  // 11 bytes, as k10
            try storage.storeOrThrow(1_000, forKey: "k4")  // overwritten: "1000", 4 bytes, not 3

            let statistics = try storage.statistics
            #expect(statistics.keyCount == 12)
            let expectedLive =
                LogFormat.headerSize + (1...11).reduce(0) { $0 + Self.recordSize("k\($1)", $1 == 4 ? 4 : $1 + 1) }
                + Self.recordSize("a11", 11)
            #expect(statistics.liveBytes == expectedLive)
            #expect(statistics.largestKeys.count == TinyStorage.Statistics.largestKeysListed)
            #expect(
                statistics.largestKeys.map(\.key) == ["k11", "a11", "k10", "k9", "k8", "k7", "k6", "k5", "k3", "k4"],
                "largest first, ties in key order")
            #expect(statistics.largestKeys.first?.bytes == 12)
            #expect(statistics.fileSize >= statistics.liveBytes, "the file holds the overwritten record too")

            // A compacted file holds the live data and nothing else.
            try storage.compactNow()
            let compacted = try storage.statistics
            #expect(compacted.liveBytes == expectedLive)
            let onDisk = try FileManager.default.attributesOfItem(atPath: storage.fileURL.path)[.size] as? Int
            #expect(compacted.fileSize == onDisk)
        }
    }

    @Test func statisticsSeeAnotherInstancesCommits() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow(1, forKey: "mine")
            let other = openStore(directory)
            try other.storeOrThrow(String(repeating: "z", count: 500), forKey: "theirs")
            let statistics = try storage.statistics
            #expect(statistics.keyCount == 2)
            #expect(statistics.largestKeys.first == .init(key: "theirs", bytes: 502))
        }
    }

    @Test func anUnavailableStoreHasNoStatistics() throws {
        try withTemporaryDirectory { directory throws in
            let file = directory.appendingPathComponent("not-a-directory")
            try Data("x".utf8).write(to: file)
            let storage = openStore(file)
            expectError(.unavailable) { try storage.statistics }
        }
    }

    @Test func anInMemoryStoreHasLiveBytesAndNoFile() throws {
        let storage = TinyStorage.inMemory()
        try storage.storeOrThrow("abc", forKey: "k")
        let statistics = try storage.statistics
        #expect(statistics.fileSize == 0)
        #expect(statistics.liveBytes == LogFormat.headerSize + Self.recordSize("k", 5))
        #expect(statistics.largestKeys == [.init(key: "k", bytes: 5)])
    }

    // MARK: The size limit

    /// A store limited to its current live bytes plus `room`, with the files' bytes to compare.
    static func limitedStore(
        in directory: URL, room: Int
    ) throws -> (storage: TinyStorage, unchanged: () throws -> Bool) {
        let storage = openStore(directory)
        try storage.storeOrThrow(String(repeating: "a", count: 100), forKey: "base")
        storage.sizeLimit = try storage.statistics.liveBytes + room
        let data = try Data(contentsOf: storage.fileURL)
        return (storage, { try Data(contentsOf: storage.fileURL) == data })
    }

    @Test func everyWriteThatWouldGrowPastTheLimitThrowsAndWritesNothing() throws {
        try withTemporaryDirectory { directory throws in
            let (storage, unchanged) = try Self.limitedStore(in: directory, room: 10)
            let big = String(repeating: "b", count: 200)
            let error = expectError(.sizeLimitExceeded) { try storage.storeOrThrow(big, forKey: "new") }
            #expect(error?.message.contains("sizeLimit") == true)
            expectError(.sizeLimitExceeded) { try storage.storeOrThrow(big, forKey: "base") }
            expectError(.sizeLimitExceeded) { try storage.bulkStoreOrThrow(items: ["x": big, "y": 1]) }
            expectError(.sizeLimitExceeded) { try storage.update("new", as: String.self) { $0 = big } }
            expectError(.sizeLimitExceeded) { try storage.group(LimitedGroup.self).storeOrThrow(big, forKey: .note) }
            expectError(.sizeLimitExceeded) { try storage.incrementIntegerOrThrow(forKey: "counter", by: 1) }
            let typed = TinyStorage.Key<String>("typed", default: "")
            storage[typed] = big
            storage.store(big, forKey: "logged")
            #expect(try unchanged())
            #expect(!storage.contains("new") && !storage.contains("typed") && !storage.contains("logged"))
        }
    }

    @Test func writesThatFitShrinkOrKeepTheSizeSucceedEvenOverALoweredLimit() throws {
        try withTemporaryDirectory { directory throws in
            let (storage, _) = try Self.limitedStore(in: directory, room: 50)
            try storage.storeOrThrow(7, forKey: "small")  // fits in the room
            storage.sizeLimit = 0  // now far over it
            try storage.storeOrThrow(String(repeating: "c", count: 100), forKey: "base")  // same size
            try storage.storeOrThrow("short", forKey: "base")  // smaller
            // One commit that grows one key and shrinks another by more: smaller overall.
            try storage.bulkStoreOrThrow(items: ["small": 123_456, "base": ""])
            _ = try storage.removeOrThrow(key: "small")
            #expect(storage.retrieve(type: String.self, forKey: "base") == "")
            expectError(.sizeLimitExceeded) { try storage.storeOrThrow(1, forKey: "more") }
            storage.sizeLimit = nil
            try storage.storeOrThrow(String(repeating: "d", count: 10_000), forKey: "more")
        }
    }

    @Test func theLimitCountsTheCommitsOwnRepeatsAndClears() throws {
        let storage = TinyStorage.inMemory()
        try storage.storeOrThrow(String(repeating: "a", count: 1_000), forKey: "large")
        storage.sizeLimit = try storage.statistics.liveBytes
        // A reset then a refill of the same size is one commit that keeps the size.
        try storage.engine.commit { _ in
            var commit = LogCommit(
                writeID: nil,
                operations: SmallList(
                    .put(key: "large", value: Data("\"\(String(repeating: "b", count: 1_000))\"".utf8), kind: .json)))
            commit.clearsFirst = true
            return Engine.Plan(commit: commit, result: ())
        }
        #expect(storage.retrieve(type: String.self, forKey: "large")?.first == "b")
        // The same key twice: the last value (one byte more than the first one) counts, once.
        expectError(.sizeLimitExceeded) {
            try storage.engine.commit { _ in
                Engine.Plan(
                    commit: LogCommit(
                        writeID: nil,
                        operations: SmallList([
                            .put(key: "large", value: Data("1".utf8), kind: .json),
                            .put(key: "large", value: Data(repeating: 0x31, count: 1_003), kind: .json),
                        ])), result: ())
            }
        }
    }

    @Test func theLimitSurvivesAReplacedFileAndANegativeLimitCountsAsZero() throws {
        try withTemporaryDirectory { directory throws in
            let (storage, _) = try Self.limitedStore(in: directory, room: 10)
            let limit = storage.sizeLimit
            try openStore(directory).compactNow()  // another instance replaces the file
            #expect(storage.sizeLimit == limit)
            expectError(.sizeLimitExceeded) {
                try storage.storeOrThrow(String(repeating: "e", count: 100), forKey: "x")
            }
            storage.sizeLimit = -5
            #expect(storage.sizeLimit == 0)
        }
    }
}
