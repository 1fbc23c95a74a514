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

        func engineDidChange(_ changes: [ChangeSet]) { lock.withLock { changed += changes.map(\.sequence) } }
        func engineDidAnnounce(_ changes: [ChangeSet]) { lock.withLock { announced += changes.map(\.sequence) } }

        var streamed: [UInt64] { lock.withLock { changed } }
        var posted: [UInt64] { lock.withLock { announced } }
    }

    private static func change(_ key: String) -> ChangeSet {
        ChangeSet(keys: SmallList(key), values: [], writeID: nil, isExternal: false)
    }

    /// While the announcing queue does not run (a tool that never services the main queue),
    /// drained batches wait for it, and the list committing threads append to must still be
    /// memory written before, with room for the next batch: appending into new memory cost them
    /// a page fault every 64 changes (the cost itself is measured in `Benchmarks/`). Checked by
    /// the list's room before each batch and its not growing during it, on every platform.
    /// Every change is still streamed once, in order, and announced once the queue runs.
    @Test func committingThreadsAppendIntoListsPreparedForThemWhileAnnouncementsWait() {
        let announcing = DispatchQueue(label: "announcements.held")
        announcing.suspend()
        let delivery = ChangeDelivery(announcingOn: announcing)
        let recorder = Recorder()
        delivery.setListener(recorder)

        // NB: 50 changes a batch, fewer than any list the delivery prepares has room for.
        let batches = (0..<200).map { batch in (0..<50).map { Self.change("k\(batch)-\($0)") } }
        for change in batches[0] { delivery.enqueue(change) }
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
        #expect(recorder.posted == Array(1...10_000))
    }

    /// A batch larger than what is kept for the next one is freed, not kept: a burst must not
    /// leave the store holding its memory.
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
        #expect(recorder.posted == recorder.streamed)
    }
}
