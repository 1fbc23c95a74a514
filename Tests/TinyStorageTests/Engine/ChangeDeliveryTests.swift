import Dispatch
import Foundation
import Testing

@testable import TinyStorage

/// Change delivery takes no new memory on the committing side in steady state, whether or not
/// the announcing queue runs, and still delivers every change once, in order, on both paths.
@Suite struct ChangeDeliveryTests {
    /// Records what the delivery hands it, in order.
    final class Recorder: EngineListener, @unchecked Sendable {
        // @unchecked: both lists are guarded by `lock`.
        private let lock = NSLock()
        private var changed: [UInt64] = []
        private var announced: [UInt64] = []

        func engineDidChange(_ change: ChangeSet) { lock.withLock { changed.append(change.sequence) } }
        func engineDidAnnounce(_ change: ChangeSet) { lock.withLock { announced.append(change.sequence) } }

        var streamed: [UInt64] { lock.withLock { changed } }
        var posted: [UInt64] { lock.withLock { announced } }
    }

    private static func change(_ key: String) -> ChangeSet {
        ChangeSet(keys: SmallList(key), values: [], writeID: nil, isExternal: false)
    }

    /// While the announcing queue does not run (a tool that never services the main queue),
    /// drained batches wait for it; the list commits append to must not be one of them, or
    /// every batch would be appended into memory never written before (a page fault per 64
    /// changes, on the committing thread).
    @Test func committingThreadsAppendIntoTheSameTwoListsWhileAnnouncementsWait() {
        let announcing = DispatchQueue(label: "announcements.held")
        announcing.suspend()
        let delivery = ChangeDelivery(announcingOn: announcing)
        let recorder = Recorder()
        delivery.setListener(recorder)

        // NB: the delivery also drains on its own, a millisecond after a batch starts, so a slow
        // run may split a batch, and a list may be replaced while it first grows; after that,
        // only two lists are ever appended to (the old code took a new one for every batch).
        var storages: [UnsafeRawPointer?] = []
        for batch in 0..<12 {
            for index in 0..<500 { delivery.enqueue(Self.change("key-\(batch)-\(index)")) }
            storages.append(delivery.pendingStorage)
            delivery.drainNow()
        }
        #expect(storages.allSatisfy { $0 != nil })
        #expect(Set(storages.suffix(6)).count <= 2)
        #expect(recorder.streamed == Array(1...6_000))
        #expect(recorder.posted.isEmpty)

        announcing.resume()
        delivery.waitUntilDelivered()
        #expect(recorder.posted == Array(1...6_000))
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
        let kept = delivery.keptCapacity
        #expect(kept.pending <= ChangeDelivery.recycledCapacity)
        #expect(kept.spare <= ChangeDelivery.recycledCapacity)
        delivery.waitUntilDelivered()
        #expect(recorder.streamed == Array(1...UInt64(large + 10)))
        #expect(recorder.posted == recorder.streamed)
    }
}
