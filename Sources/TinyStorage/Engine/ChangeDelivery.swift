import Dispatch
import Foundation

/// Receives the engine's change sets, in commit order, never while the store holds a lock.
protocol EngineListener: AnyObject, Sendable {
    /// Feeds value streams; called on the delivery's own queue, whatever thread the app uses.
    func engineDidChange(_ change: ChangeSet)
    /// Signals Observation and posts the notification; called on the announcing queue (the main
    /// queue unless the store was opened with another).
    func engineDidAnnounce(_ change: ChangeSet)
}

/// Delivers change sets to a listener, one per commit, in commit order: first on a private
/// serial queue (value streams), then on the announcing queue (Observation, notifications).
///
/// NB: posting a `Notification` costs more than a whole commit (over a microsecond on Linux), so
/// committing threads only append to a list, and the private queue drains it about a millisecond
/// later, so a burst of commits costs one thread wake-up, not one each; the announcing queue then
/// gets one block per batch. Nothing here runs inside a store call or while the store holds a lock.
final class ChangeDelivery: Sendable {
    private struct State {
        weak var listener: (any EngineListener)?
        /// Whether a listener was set: what a commit checks, where loading the weak reference
        /// would cost it an atomic operation on the listener's side table. Once the listener is
        /// gone, its changes are dropped by the private queue instead.
        var hasListener = false
        /// Changes waiting for the private queue.
        var pending: [ChangeSet] = []
        /// An empty list whose memory the private queue gave back after a drain: the next drain
        /// makes it ``pending`` (see ``ChangeDelivery/drain()``).
        var spare: [ChangeSet] = []
        var scheduled = false
        var lastSequence: UInt64 = 0
    }

    /// Changes whose streams were fed, waiting for the announcing queue.
    ///
    /// NB: under a lock of their own, not the one committing threads take: a batch's changes are
    /// copied in here, and while the announcing queue does not run (a command-line tool that never
    /// services the main queue) this list only grows; commits must wait for neither.
    private struct Announcements {
        var changes: [ChangeSet] = []
        var scheduled = false
    }

    private let state = Locked(State())
    private let announcements = Locked(Announcements())
    private let queue = DispatchQueue(label: "TinyStorage.changeDelivery", qos: .utility)
    /// The main queue, or a serial queue that runs on the one the store was given.
    private let announcingQueue: DispatchQueue
    private let announcesOnMain: Bool
    /// Set on the announcing queue, so code can tell it is running there.
    private let announcingKey: DispatchSpecificKey<Bool>
    /// Set on the main queue once: `Thread.isMainThread` is not the same thing on Linux, where
    /// `dispatchMain()` ends the main thread and a worker thread serves the main queue.
    private static let mainQueueKey: DispatchSpecificKey<Bool> = {
        let key = DispatchSpecificKey<Bool>()
        DispatchQueue.main.setSpecific(key: key, value: true)
        return key
    }()
    /// How long changes may gather before they are delivered.
    static let batchingDelay: DispatchTimeInterval = .milliseconds(1)
    /// The most changes whose memory a drain gives back for the next batch (a list of this
    /// many takes 256 KiB); a larger batch's is freed.
    static let recycledCapacity = 4_096

    /// - Parameter queue: Where Observation is signalled and notifications are posted. The main
    ///   queue is used as it is; any other gets a serial queue in front of it, so that even a
    ///   concurrent queue receives the changes one at a time, in order.
    init(announcingOn queue: DispatchQueue) {
        // NB: by the key set on the main queue: Linux wraps it in a new object on every access.
        announcesOnMain = queue.getSpecific(key: Self.mainQueueKey) == true
        if announcesOnMain {
            announcingQueue = queue
            announcingKey = Self.mainQueueKey
        } else {
            announcingQueue = DispatchQueue(label: "TinyStorage.announcements", target: queue)
            announcingKey = DispatchSpecificKey<Bool>()
            announcingQueue.setSpecific(key: announcingKey, value: true)
        }
    }

    func setListener(_ listener: any EngineListener) {
        state.withLock {
            $0.listener = listener
            $0.hasListener = true
        }
    }

    /// Queues `change` for delivery and numbers it. Call with the engine's lock held, so the
    /// numbering and the delivery order are the commit order.
    func enqueue(_ change: ChangeSet) {
        enqueue { sequence in
            var change = change
            change.sequence = sequence
            return change
        }
    }

    /// Queues the change `make` builds, given its number, as the other `enqueue` does a finished
    /// one: built in place in the list, where copying a finished change set in and destroying
    /// the original cost an overwrite about a tenth of its instructions.
    func enqueue(_ make: (_ sequence: UInt64) -> ChangeSet) {
        let schedule = state.withLock { state in
            guard state.hasListener else { return false }
            state.lastSequence += 1
            state.pending.append(make(state.lastSequence))
            defer { state.scheduled = true }
            return !state.scheduled
        }
        if schedule { queue.asyncAfter(deadline: .now() + Self.batchingDelay) { self.drain() } }
    }

    /// The number of the last change queued. Changes numbered up to it are already reflected in
    /// the engine's state when read under the engine's lock.
    var lastSequence: UInt64 { state.withLock { $0.lastSequence } }

    /// On the private queue: feeds the streams, then hands the batch to the announcing queue.
    ///
    /// NB: the batch's memory comes back as the next batch's (``State/spare``), rather than each
    /// batch taking new memory: committing threads append each change to ``State/pending``, and
    /// a list whose memory was never written costs them a page fault every 64 changes (4–6 µs
    /// each here), in a process whose announcing queue does not run, where batches are kept
    /// until it does, and in a busy one, where a batch outgrows what the allocator recycles:
    /// 4,614 of the committing thread's 6,230 faults in 300,000 `Int` overwrites. The changes are
    /// copied into ``announcements`` instead, here, off the committing threads.
    private func drain() {
        var batch: [ChangeSet] = []
        let listener = state.withLock { state -> (any EngineListener)? in
            swap(&batch, &state.pending)
            swap(&state.pending, &state.spare)
            state.scheduled = false
            return state.listener
        }
        defer { recycle(&batch) }
        guard let listener, !batch.isEmpty else { return }
        for change in batch { listener.engineDidChange(change) }
        let scheduleAnnouncement = announcements.withLock { announcements in
            announcements.changes.append(contentsOf: batch)
            defer { announcements.scheduled = true }
            return !announcements.scheduled
        }
        guard scheduleAnnouncement else { return }
        if announcesOnMain {
            // NB: as an operation of `OperationQueue.main`, which runs on the main queue, so that
            // observers added with `queue: .main` run inline. Foundation on Linux sees no current
            // operation queue in a plain main-queue block there, so it would hand them to
            // `OperationQueue.main` and wait for it: a deadlock, since that is where we are.
            OperationQueue.main.addOperation { self.announce() }
        } else {
            announcingQueue.async { self.announce() }
        }
    }

    /// Empties a drained batch and keeps its memory for the next one, up to ``recycledCapacity``.
    ///
    /// NB: ``State/spare`` is empty here: the drain made it ``State/pending``, and drains run one
    /// at a time.
    private func recycle(_ batch: inout [ChangeSet]) {
        guard batch.capacity <= Self.recycledCapacity else { return }
        batch.removeAll(keepingCapacity: true)
        state.withLock { state in swap(&state.spare, &batch) }
    }

    /// On the announcing queue: Observation and notifications, in order.
    private func announce() {
        let changes = announcements.withLock { announcements in
            var changes: [ChangeSet] = []
            swap(&changes, &announcements.changes)
            announcements.scheduled = false
            return changes
        }
        guard let listener = state.withLock({ $0.listener }) else { return }
        for change in changes { listener.engineDidAnnounce(change) }
    }

    /// Feeds the streams every change queued so far and hands them to the announcing queue,
    /// without waiting for it (tests).
    func drainNow() {
        queue.sync { drain() }
    }

    /// Where the list that committing threads append to keeps its changes (tests).
    var pendingStorage: UnsafeRawPointer? {
        state.withLock { state in state.pending.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) } }
    }

    /// How many changes the two lists kept for committing threads have room for (tests).
    var keptCapacity: (pending: Int, spare: Int) {
        state.withLock { ($0.pending.capacity, $0.spare.capacity) }
    }

    /// Blocks until every change enqueued before this call has been delivered everywhere.
    ///
    /// On the announcing queue (the main queue, by default) the waiting announcements run
    /// inline, in order; elsewhere this waits for that queue, which must be running.
    func waitUntilDelivered() {
        queue.sync { drain() }
        if DispatchQueue.getSpecific(key: announcingKey) == true {
            announce()
        } else if announcesOnMain {
            OperationQueue.main.addOperations([BlockOperation { self.announce() }], waitUntilFinished: true)
        } else {
            announcingQueue.sync { announce() }
        }
    }
}
