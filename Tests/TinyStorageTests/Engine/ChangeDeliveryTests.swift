import Dispatch
import Foundation
import Testing

@testable import TinyStorage

/// Change delivery has committing threads append only into memory written before, whether or
/// not the announcing queue runs, keeps no more than it needs for the next batches, and still
/// delivers every change once, in order, on both paths.
@Suite struct ChangeDeliveryTests {
    /// Records what the delivery hands it, in order.
    final class Recorder: EngineListener, @unchecked Sendable {
        // @unchecked: both lists are guarded by `lock`.
        private let lock = NSLock()
        private var changed: [UInt64] = []
        private var announced: [UInt64] = []
        private var announcedKeys: [String] = []

        func engineDidChange(_ changes: [ChangeSet]) { lock.withLock { changed += changes.map(\.sequence) } }
        func engineDidAnnounce(_ changes: [ChangeSet]) {
            lock.withLock {
                announced += changes.map(\.sequence)
                announcedKeys += changes.flatMap(\.keys)
            }
        }

        var streamed: [UInt64] { lock.withLock { changed } }
        /// The number of the last change each announcement stands for.
        var posted: [UInt64] { lock.withLock { announced } }
        /// Every key announced, in order.
        var postedKeys: [String] { lock.withLock { announcedKeys } }
    }

    private static func change(_ key: String) -> ChangeSet {
        ChangeSet(keys: SmallList(key), values: [], writeID: nil, isExternal: false)
    }

    /// While the announcing queue does not run (a tool that never services the main queue),
    /// drained batches wait for it, and the list committing threads append to must still be
    /// memory written before, with room for the next batch: appending into new memory cost them
    /// a page fault every 64 changes (the cost itself is measured in `Benchmarks/`). Checked by
    /// the list's room before each batch and its not growing during it, on every platform.
    /// Every change is still streamed once, in order, and announced once the queue runs: the
    /// first ``AnnouncementBacklog/limit`` one each, the rest together in the last announcement,
    /// so the backlog stays small.
    @Test func committingThreadsAppendIntoListsPreparedForThemWhileAnnouncementsWait() {
        let announcing = DispatchQueue(label: "announcements.held")
        announcing.suspend()
        let delivery = ChangeDelivery(announcingOn: announcing)
        let recorder = Recorder()
        delivery.setListener(recorder)

        // NB: 50 changes a batch, fewer than any list the delivery prepares has room for.
        let batches = (0..<200).map { batch in (0..<50).map { Self.change("k\(batch)-\($0)") } }
        // NB: drains held back for the first batch too: a drain scheduled by its first change
        // could otherwise take part of it (its enqueuing took over the batching delay under load)
        // and leave a list with room for only that part to be used again.
        delivery.pauseDrains()
        for change in batches[0] { delivery.enqueue(change) }
        delivery.resumeDrains()
        delivery.drainNow()
        var unprepared: [Int] = []
        for (index, batch) in batches.enumerated().dropFirst() {
            // NB: no drain of its own in the middle of a batch, which would swap the list.
            delivery.pauseDrains()
            let room = delivery.keptCapacity.pending
            for change in batch { delivery.enqueue(change) }
            if room < batch.count || delivery.keptCapacity.pending != room { unprepared.append(index) }
            delivery.resumeDrains()
            delivery.drainNow()
        }
        #expect(unprepared.isEmpty, "batches appended into a list that had no room for them: \(unprepared)")
        #expect(recorder.streamed == Array(1...10_000))
        #expect(recorder.posted.isEmpty)

        announcing.resume()
        delivery.waitUntilDelivered()
        let limit = UInt64(AnnouncementBacklog.limit)
        #expect(recorder.posted == Array(1..<limit) + [10_000])
        #expect(recorder.postedKeys == batches.flatMap { $0.flatMap(\.keys) })
    }

    /// A batch larger than what is kept for the next one is freed, not kept: a burst must not
    /// leave the store holding its memory. Its changes past the backlog's limit are announced
    /// together.
    @Test func aBatchLargerThanTheRecycledCapacityIsNotKept() {
        let delivery = ChangeDelivery(announcingOn: DispatchQueue(label: "announcements"))
        let recorder = Recorder()
        delivery.setListener(recorder)
        let large = ChangeDelivery.recycledCapacity * 2
        for index in 0..<large { delivery.enqueue(Self.change("key-\(index)")) }
        delivery.drainNow()
        for index in 0..<10 { delivery.enqueue(Self.change("small-\(index)")) }
        delivery.drainNow()
        delivery.waitUntilDelivered()
        let kept = delivery.keptCapacity
        #expect(kept.pending <= ChangeDelivery.recycledCapacity)
        #expect(kept.spare <= ChangeDelivery.recycledCapacity)
        #expect(recorder.streamed == Array(1...UInt64(large + 10)))
        #expect(
            recorder.posted.prefix(AnnouncementBacklog.limit - 1)
                == recorder.streamed.prefix(AnnouncementBacklog.limit - 1))
        #expect(recorder.posted.last == UInt64(large + 10))
        #expect(Set(recorder.postedKeys).count == large + 10 && recorder.postedKeys.count == large + 10)
    }

    /// What waits for the announcing queue: another process's consecutive changes with one
    /// writeID (or none) as one, local ones and different writeIDs one each; past the limit,
    /// everything joins the last one, keeping a writeID only when every change carried it.
    @Test func theBacklogMergesExternalRunsAndEverythingPastItsLimit() {
        func change(_ keys: [String], _ writeID: String?, external: Bool, _ sequence: UInt64) -> ChangeSet {
            ChangeSet(keys: SmallList(keys), values: [], writeID: writeID, isExternal: external, sequence: sequence)
        }
        var backlog = AnnouncementBacklog()
        for (sequence, item) in [
            (["a"], nil, true), (["b", "a"], nil, true), (["c"], "w", true), (["c"], "w", true), (["d"], "v", true),
            (["e"], nil, false), (["e"], nil, false), (["f"], nil, true),
        ].enumerated() {
            backlog.add(change(item.0, item.1, external: item.2, UInt64(sequence + 1)))
        }
        let merged = backlog.take()
        #expect(merged.map { Array($0.keys) } == [["a", "b"], ["c"], ["d"], ["e"], ["e"], ["f"]])
        #expect(merged.map(\.writeID) == [nil, "w", "v", nil, nil, nil])
        #expect(merged.map(\.sequence) == [2, 4, 5, 6, 7, 8])
        #expect(backlog.take().isEmpty)

        for sequence in 1...AnnouncementBacklog.limit {
            backlog.add(change(["k\(sequence)"], "w", external: false, UInt64(sequence)))
        }
        backlog.add(change(["x"], "w", external: false, 5_000))
        backlog.add(change(["k1", "y"], "w", external: true, 5_001))
        #expect(backlog.changes.count == AnnouncementBacklog.limit)
        #expect(backlog.changes.last.map { Array($0.keys) } == ["k\(AnnouncementBacklog.limit)", "x", "k1", "y"])
        #expect(backlog.changes.last?.writeID == "w" && backlog.changes.last?.sequence == 5_001)
        backlog.add(change(["z"], "other", external: true, 5_002))
        #expect(backlog.changes.count == AnnouncementBacklog.limit && backlog.changes.last?.writeID == nil)
    }
}
