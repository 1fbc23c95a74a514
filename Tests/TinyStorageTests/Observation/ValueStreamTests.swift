import Foundation
import Testing

@testable import TinyStorage

/// Issue 3 item 4: `values(forKey:as:)` yields the current value, then the value after every
/// change to that key, in commit order, whoever made it: another task, another instance on the
/// same directory (the same lock file and file watch another process uses). Streams fed by
/// another process are in IntegrationTests/CrossProcessChangeTests.swift.
///
/// Every test collects a known number of values; the deadline only guards against a hang.
@Suite struct ValueStreamTests {
    @Test func yieldsTheCurrentValueThenEveryChangeFromAnotherTaskInOrder() async throws {
        try await withScratchDirectory { directory in
            let storage = openStore(directory)
            try storage.storeOrThrow(0, forKey: "k")
            let stream = storage.values(forKey: "k", as: Int.self)
            let writer = Task.detached {
                for value in 1...50 { try storage.storeOrThrow(value, forKey: "k") }
            }
            let values = await collect(stream, count: 51)
            try await writer.value
            #expect(values == Array(0...50))
        }
    }

    @Test func yieldsEveryChangeMadeByAnotherInstanceOnTheSameDirectory() async throws {
        try await withScratchDirectory { directory in
            let storage = openStore(directory)
            let other = openStore(directory)
            try other.storeOrThrow(0, forKey: "k")
            let stream = storage.values(forKey: "k", as: Int.self)
            let writer = Task.detached {
                for value in 1...50 {
                    if value.isMultiple(of: 2) {
                        try other.storeOrThrow(value, forKey: "k")
                    } else {
                        try other.update("k", as: Int.self) { $0 = value }
                    }
                }
            }
            // Nobody touches `storage` while it streams: its file watch brings every commit.
            let values = await collect(stream, count: 51)
            try await writer.value
            #expect(values == Array(0...50))
        }
    }

    @Test func anAbsentOrRemovedKeyYieldsNil() async throws {
        try await withScratchDirectory { directory in
            let storage = openStore(directory)
            let stream = storage.values(forKey: "k", as: String.self)
            storage.store("a", forKey: "k")
            storage.remove(key: "k")
            storage.store("b", forKey: "k")
            storage.store(nil, forKey: "k")
            storage.store("c", forKey: "k")
            storage.reset()
            let values = await collect(stream, count: 7)
            #expect(values == [nil, "a", nil, "b", nil, "c", nil])
        }
    }

    @Test func otherKeysNoOpWritesAndUndecodableValuesYieldNothing() async throws {
        try await withScratchDirectory { directory in
            let storage = openStore(directory)
            let logger = TestLogger()
            let other = openStore(directory, logger: logger)
            storage.store(1, forKey: "k")
            let stream = storage.values(forKey: "k", as: Int.self)
            storage.store(1, forKey: "other")
            storage.store(1, forKey: "k")
            other.store(1, forKey: "k")
            storage.bulkStore(items: ["k": 1, "other": 2])
            storage.store("not an Int", forKey: "k")
            storage.store(2, forKey: "k")
            let values = await collect(stream, count: 2)
            // The next real change comes right after: nothing was yielded in between.
            #expect(values == [1, 2])
        }
    }

    /// Every stream starts after the writer's first commit and before its last: the writer
    /// waits, one commit short of the end, until every stream is open, and runs freely before.
    @Test func streamsStartedWhileAWriterRunsMissAndRepeatNothing() async throws {
        try await withScratchDirectory { directory in
            let storage = openStore(directory)
            try storage.storeOrThrow(0, forKey: "k")
            let last = 2_000
            let streamsOpen = DispatchSemaphore(value: 0)
            let failure = Locked<(any Error)?>(nil)
            let writer = Task {
                await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                    Thread.detachNewThread {
                        do {
                            for value in 1...last {
                                if value == last { streamsOpen.wait() }
                                try storage.storeOrThrow(value, forKey: "k")
                            }
                        } catch {
                            failure.withLock { $0 = error }
                        }
                        done.resume()
                    }
                }
            }
            while storage.integer(forKey: "k") == 0 { await Task.yield() }
            // Each stream starts at whatever value is current and must then step by one.
            var streams: [AsyncStream<Int?>] = []
            for _ in 0..<8 {
                streams.append(storage.values(forKey: "k", as: Int.self))
                await Task.yield()
            }
            streamsOpen.signal()
            await writer.value
            #expect(failure.withLock { $0 } == nil)
            for stream in streams {
                let values = await collect(stream, until: { $0 == last }).map { $0 ?? -1 }
                let first = values.first ?? 0
                #expect(first > 0 && first < last, "the stream did not start while the writer ran")
                #expect(values == Array(first...last), "a stream skipped or repeated a value")
            }
        }
    }

    /// Releasing the store finishes its streams at once: what was yielded before is read, then
    /// the stream ends. A value yielded into the stream after the release (through the
    /// subscriber the store held) tells an ended stream, which drops it, from one left open,
    /// which hands it over: no deadline decides.
    @Test func aStreamEndsWhenTheStoreIsReleased() async throws {
        try await withScratchDirectory { directory in
            var storage: TinyStorage? = openStore(directory)
            storage?.store(1, forKey: "k")
            let stream = storage?.values(forKey: "k", as: Int.self) ?? AsyncStream { $0.finish() }
            storage?.store(2, forKey: "k")
            storage?.engine.delivery.waitUntilDelivered()
            let subscribers = storage?.subscribers.withLock { Array($0.values) } ?? []
            let stored = try #require(try storage?.engine.withLiveEntries { $0["k"]?.stored })
            #expect(subscribers.count == 1)
            weak let released = storage
            storage = nil
            try #require(released == nil, "the store outlived its last reference")
            for subscriber in subscribers { subscriber.receive(stored) }
            #expect(await collect(stream, count: 3) == [1, 2], "the stream did not end with the store")
        }
    }
}
