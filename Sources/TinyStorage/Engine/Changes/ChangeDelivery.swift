import Dispatch
import Foundation

/// Receives the engine's change sets, in commit order, never while the store holds a lock.
protocol EngineListener: AnyObject, Sendable {
    /// Feeds value streams a batch of changes, in commit order; called on the delivery's own
    /// queue, whatever thread the app uses.
    func engineDidChange(_ changes: [ChangeSet])
    /// Signals Observation and posts the notifications of a batch of changes, one per change, in
    /// commit order; called on the announcing queue (the main queue unless the store was opened
    /// with another).
    func engineDidAnnounce(_ changes: [ChangeSet])
}

/// Delivers change sets to a listener, one per commit, in commit order: first on a private
/// serial queue (value streams), then on the announcing queue (Observation, notifications; there
/// another process's consecutive commits with one writeID become one, see ``AnnouncementBacklog``).
///
/// NB: posting a `Notification` costs more than a whole commit (over a microsecond on Linux), so
/// committing threads only append to a list, and the private queue drains it about a millisecond
/// later, so a burst of commits costs one thread wake-up, not one each; the announcing queue then
/// gets the batch whole. Nothing here runs inside a store call or while the store holds a lock.
///
/// NB: what the private queue does per change competes with the committing threads for the
/// machine's cores, so it does as little as it can: a drained change joins the announcing
/// queue's backlog as it is, or merged into the one before it (see ``AnnouncementBacklog``), and
/// the list committing threads append to next is one whose memory was written before, off the
/// committing threads (see ``drain()``).
final class ChangeDelivery: Sendable {
    /// The listener, under a lock of its own (committing threads never take it).
    private struct Listening {
        weak var listener: (any EngineListener)?
    }

    /// The changes whose streams were fed, waiting for the announcing queue.
    ///
    /// NB: under a lock of their own, not the one committing threads take: commits must wait
    /// for neither the announcing queue nor the changes added here. The backlog stays small
    /// however far behind that queue falls (see ``AnnouncementBacklog``).
    private struct Announcements {
        var backlog = AnnouncementBacklog()
        var scheduled = false
    }

    private let listening = Locked(Listening())
    /// The changes committing threads queue, under the lock they already hold (see
    /// ``PendingChanges``).
    private let pending: any PendingChangesLock
    private let announcements = Locked(Announcements())
    private let queue = DispatchQueue(label: "TinyStorage.changeDelivery", qos: .utility)
    /// Where drains run, when not on `queue` after a delay (see ``init(announcingOn:pending:drains:)``).
    private let drains: BackgroundScheduler?
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
    /// The most changes a list kept for the committing threads has room for; a larger one,
    /// grown by a larger batch, is freed once drained.
    static let recycledCapacity = 4_096
    /// The room a list prepared for the committing threads has.
    static let minimumCapacity = 64

    /// - Parameters:
    ///   - queue: Where Observation is signalled and notifications are posted. The main queue is
    ///     used as it is; any other gets a serial queue in front of it, so that even a concurrent
    ///     queue receives the changes one at a time, in order.
    ///   - pending: Where the changes committing threads queue are kept, under which lock: the
    ///     engine's state, whose lock every commit holds; by default, a lock of their own.
    ///   - drains: Where drains run: `nil`, the private queue, a batching delay after they were
    ///     scheduled; the deterministic simulation gives its own.
    init(
        announcingOn queue: DispatchQueue, pending: any PendingChangesLock = Locked(PendingChanges()),
        drains: BackgroundScheduler? = nil
    ) {
        self.pending = pending
        self.drains = drains
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

    /// Sets the listener; until then, changes are not queued. Call without the pending
    /// changes' lock (the engine's).
    func setListener(_ listener: any EngineListener) {
        listening.withLock { $0.listener = listener }
        // NB: the list the first drain hands the committing threads, prepared as every later one is.
        let spare = Self.writtenList(capacity: Self.minimumCapacity)
        pending.withPendingChanges { pending in
            pending.hasListener = true
            if pending.spare.capacity == 0 { pending.spare = spare }
        }
    }

    /// Queues `change` for delivery and numbers it, taking the pending changes' lock: for a
    /// delivery with a lock of its own (tests). The engine queues through
    /// ``PendingChanges/append(_:)`` under its lock, then calls ``scheduleDrain()``.
    func enqueue(_ change: ChangeSet) {
        if pending.withPendingChanges({ $0.append(change) }) { scheduleDrain() }
    }

    /// Has the private queue drain the pending changes a little later (``batchingDelay``): call
    /// when ``PendingChanges/append(_:)`` says so.
    func scheduleDrain() {
        guard let drains else { return queue.asyncAfter(deadline: .now() + Self.batchingDelay) { self.drain() } }
        drains.schedule { self.queue.sync { self.drain() } }
    }

    /// The number of the last change queued. Changes numbered up to it are already reflected in
    /// the engine's state. Takes the pending changes' lock (the engine's): under it, read
    /// ``PendingChanges/lastSequence``.
    var lastSequence: UInt64 { pending.withPendingChanges { $0.lastSequence } }

    /// On the private queue: builds the change sets of the commits queued since the last drain
    /// (reading the logged ones back, see ``LoggedChanges``), feeds the streams, then hands
    /// the batch to the announcing queue.
    ///
    /// NB: the list committing threads append to next is never new memory: the one just taken,
    /// emptied here, or one prepared here with its memory written once (see
    /// ``writtenList(capacity:)``). Appending into memory never written cost the committing
    /// thread a page fault every 64 changes (4–6 µs each here): 4,614 of its 6,230 faults in
    /// 300,000 `Int` overwrites, in a process whose announcing queue does not run, as in the
    /// benchmark.
    private func drain() {
        var taken: [PendingChange] = []
        let hasWork = pending.withPendingChanges { pending -> Bool in
            // NB: a scheduled drain that finds nothing (a drain ran meanwhile) swaps no lists: the
            // committing threads keep the prepared one they append to.
            guard !pending.changes.isEmpty || pending.logged != nil else {
                pending.drainScheduled = false
                return false
            }
            pending.closeLogged()
            swap(&taken, &pending.changes)
            swap(&pending.changes, &pending.spare)
            pending.drainScheduled = false
            return true
        }
        guard hasWork else { return }
        var batch: [ChangeSet] = []
        batch.reserveCapacity(taken.count)
        for change in taken {
            switch change {
            case .built(let change): batch.append(change)
            case .logged(let span): batch.append(contentsOf: span.changeSets(everyKey: pending.everyKey))
            }
        }
        // NB: drains run one at a time, so the spare is still empty here.
        taken.removeAll(keepingCapacity: true)
        let spare =
            taken.capacity > 0 && taken.capacity <= Self.recycledCapacity
            ? taken : Self.writtenList(capacity: Self.minimumCapacity)
        pending.withPendingChanges { $0.spare = spare }
        let listener = listening.withLock { $0.listener }
        guard let listener, !batch.isEmpty else { return }
        listener.engineDidChange(batch)
        let scheduleAnnouncement = announcements.withLock { announcements in
            for change in batch { announcements.backlog.add(change) }
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

    /// An empty list with room for at least `capacity` changes, its memory written once: the
    /// page faults of first writes happen here, on the private queue, not on the committing
    /// threads that fill it.
    private static func writtenList(capacity: Int) -> [PendingChange] {
        [PendingChange](unsafeUninitializedCapacity: capacity) { buffer, initialized in
            if let base = buffer.baseAddress {
                // NB: bytes only; no change is initialized, and the list stays empty.
                memset(base, 0, buffer.count * MemoryLayout<PendingChange>.stride)
            }
            initialized = 0
        }
    }

    /// On the announcing queue: Observation and notifications, in order.
    private func announce() {
        let changes = announcements.withLock { announcements in
            announcements.scheduled = false
            return announcements.backlog.take()
        }
        guard let listener = listening.withLock({ $0.listener }), !changes.isEmpty else { return }
        listener.engineDidAnnounce(changes)
    }

    /// Holds drains back until ``resumeDrains()`` (tests).
    func pauseDrains() { queue.suspend() }

    /// Lets drains run again after ``pauseDrains()`` (tests).
    func resumeDrains() { queue.resume() }

    /// Feeds the streams every change queued so far and hands them to the announcing queue,
    /// without waiting for it (tests).
    func drainNow() {
        queue.sync { drain() }
    }

    /// How many changes the two lists kept for committing threads have room for (tests).
    var keptCapacity: (pending: Int, spare: Int) {
        pending.withPendingChanges { ($0.changes.capacity, $0.spare.capacity) }
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
