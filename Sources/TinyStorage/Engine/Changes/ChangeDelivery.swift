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
/// serial queue (value streams), then on the announcing queue (Observation, notifications).
///
/// NB: posting a `Notification` costs more than a whole commit (over a microsecond on Linux), so
/// committing threads only append to a list, and the private queue drains it about a millisecond
/// later, so a burst of commits costs one thread wake-up, not one each; the announcing queue then
/// gets the batch whole. Nothing here runs inside a store call or while the store holds a lock.
///
/// NB: what the private queue does per change competes with the committing threads for the
/// machine's cores, so it does as little as it can: a drained batch is handed to the announcing
/// queue as it is, not copied change by change, and the list committing threads append to next
/// is one whose memory was written before, off the committing threads (see ``drain()``).
final class ChangeDelivery: Sendable {
    /// The listener, under a lock of its own (committing threads never take it).
    private struct Listening {
        weak var listener: (any EngineListener)?
    }

    /// Batches whose streams were fed, waiting for the announcing queue.
    ///
    /// NB: under a lock of their own, not the one committing threads take: while the announcing
    /// queue does not run (a command-line tool that never services the main queue) this list
    /// only grows; commits must wait for neither.
    private struct Announcements {
        var batches: [[ChangeSet]] = []
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
    /// benchmark. The batch goes to the announcing queue whole: copying its changes into one
    /// list there, as this did before, took this queue half as much CPU time as the committing
    /// thread took for the commits (a profile of 600,000 `Int` overwrites).
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
            announcements.batches.append(batch)
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
        let batches = announcements.withLock { announcements in
            var batches: [[ChangeSet]] = []
            swap(&batches, &announcements.batches)
            announcements.scheduled = false
            return batches
        }
        guard let listener = listening.withLock({ $0.listener }) else { return }
        for batch in batches { listener.engineDidAnnounce(batch) }
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

/// The changes committed and not yet drained, and their numbering: all a commit touches of the
/// delivery. Kept in the engine's state, whose lock every commit already holds when it queues
/// its change (so the numbering and the delivery order are the commit order); under a lock of
/// their own, as before, each commit took and released that lock too: two atomic
/// read-modify-writes more.
///
/// NB: single-key commits appended through a file mapping, nearly all commits on Linux, queue
/// no change set: they extend ``logged``, the span of the log their records fill, and the
/// delivery's queue reads their changes back from the data file (see ``LoggedChanges``). Building
/// a 64-byte change set per commit, into a list another thread drains, put an `Int` overwrite at
/// 0.41× a 40-byte `pwrite` in turns where reading the changes back put it at 0.34× (two of three
/// alternating pairs of benchmark runs, the changes read through the mapping; the third, 0.37×
/// both; read with `pread`, 0.36× in one full run): far more than the change set's instructions.
/// Each change set is written into memory the other thread held last.
struct PendingChanges {
    /// Whether a listener was set: until then nothing is queued. Once the listener is gone,
    /// its changes are dropped by the private queue instead.
    var hasListener = false
    /// Changes waiting for the private queue, in commit order; ``logged`` comes after them.
    var changes: [PendingChange] = []
    /// An empty list with room for a batch, its memory written before: the next drain makes it
    /// ``changes`` (see `ChangeDelivery.drain()`).
    var spare: [PendingChange] = []
    /// The single-key commits queued last, read back from the log by the drain.
    var logged: LoggedChanges?
    var drainScheduled = false
    /// The number of the last change queued.
    var lastSequence: UInt64 = 0
    /// Whether change sets carry the changed keys' values: once a value stream has been opened.
    var carriesValues = false

    /// Numbers the change `make` builds and queues it, built in place in the list (copying a
    /// finished change set in and destroying the original cost an overwrite about a tenth of its
    /// instructions).
    ///
    /// - Returns: Whether the caller must call `ChangeDelivery.scheduleDrain()` (it may, still
    ///   holding the lock).
    @inline(__always)
    mutating func append(_ make: (_ sequence: UInt64) -> ChangeSet) -> Bool {
        guard hasListener else { return false }
        closeLogged()
        lastSequence += 1
        changes.append(.built(make(lastSequence)))
        return markDrainScheduled()
    }

    /// Numbers the finished change `change` and queues it, as the other `append` queues the
    /// change it builds.
    mutating func append(_ change: ChangeSet) -> Bool {
        append { sequence in
            var change = change
            change.sequence = sequence
            return change
        }
    }

    /// Numbers the change of the single-key commit whose record fills `start..<end` of the
    /// mapping at `base` and queues it, by extending ``logged``, when the record follows it.
    ///
    /// NB: the mapping is named by its address: a reference to it taken from the engine's state
    /// to compare would be retained and released, two atomic operations more.
    ///
    /// - Parameter carriesValues: Whether its change set is to carry the key's value.
    /// - Returns: As ``append(_:)``; `nil` when the record does not follow ``logged`` (nothing
    ///   was queued: call ``startLogged(through:io:from:to:carriesValues:)``).
    @inline(__always)
    mutating func continueLogged(
        at base: UnsafeMutableRawPointer, from start: Int, to end: Int, carriesValues: Bool
    ) -> Bool? {
        guard hasListener else { return false }
        guard logged?.mapping.base == base, logged?.end == start, logged?.carriesValues == carriesValues else {
            return nil
        }
        lastSequence += 1
        logged?.end = end
        logged?.count += 1
        return markDrainScheduled()
    }

    /// Numbers the change of the single-key commit whose record fills `start..<end` of the file
    /// `mapping` maps, appended through it, and queues it as a new span of the log (see
    /// ``LoggedChanges``).
    ///
    /// - Returns: As ``append(_:)``.
    mutating func startLogged(
        through mapping: AppendMapping, io: FileIO, from start: Int, to end: Int, carriesValues: Bool
    ) -> Bool {
        guard hasListener else { return false }
        closeLogged()
        lastSequence += 1
        logged = LoggedChanges(
            mapping: mapping, io: io, start: start, end: end, firstSequence: lastSequence, carriesValues: carriesValues)
        return markDrainScheduled()
    }

    /// Notes that a drain is scheduled; returns whether none was, so the caller schedules one.
    @inline(__always)
    private mutating func markDrainScheduled() -> Bool {
        defer { drainScheduled = true }
        return !drainScheduled
    }

    /// Moves ``logged`` to the end of ``changes``.
    mutating func closeLogged() {
        guard let span = logged else { return }
        logged = nil
        changes.append(.logged(span))
    }
}

/// A change queued for the delivery: built, or to be read back from the log.
enum PendingChange {
    case built(ChangeSet)
    case logged(LoggedChanges)
}

/// The changes of consecutive single-key commits, as the span of the data file their records
/// fill (appended through one mapping), numbered from ``firstSequence``: read back into change
/// sets on the delivery's queue (``changeSets(everyKey:)``), not built by the committing thread.
///
/// The records are whole and published, and the store never writes them again; the file stays
/// open while this holds it, even if it is replaced meanwhile. They are read with `pread`, not
/// through the mapping: another program may have shortened the file since, and a page of a
/// mapping past the end of its file raises `SIGBUS` (the test suite did that, within the
/// millisecond before a drain). Whatever no longer reads back and verifies (shortened, written
/// over) is announced naming every key.
struct LoggedChanges {
    /// The mapping the records were copied into, held so that its address, by which the next
    /// commit tells whether it follows them, names no other mapping meanwhile; never read through.
    let mapping: AppendMapping
    let io: FileIO
    let start: Int
    var end: Int
    /// How many commits the span holds.
    var count = 1
    let firstSequence: UInt64
    let carriesValues: Bool

    init(mapping: AppendMapping, io: FileIO, start: Int, end: Int, firstSequence: UInt64, carriesValues: Bool) {
        self.mapping = mapping
        self.io = io
        self.start = start
        self.end = end
        self.firstSequence = firstSequence
        self.carriesValues = carriesValues
    }

    /// One change set per commit, as the committing thread would have built it.
    ///
    /// Commits whose records no longer verify (something else wrote over the file since: the
    /// store reports that damage when it next reads them) are still announced, one change set
    /// each, in order, naming `everyKey()` (every key the store holds, with its value): a
    /// listener learns that something changed, never that nothing did (G6).
    func changeSets(everyKey: () -> [(key: String, value: StoredValue?)]) -> [ChangeSet] {
        var sets: [ChangeSet] = []
        var sequence = firstSequence
        let read = (try? io.read(mapping.file.fd, count: end - start, at: start).get()) ?? []
        read.withUnsafeBytes { bytes in
            _ = LogScanner.scanRecords(bytes, from: 0) { writeID, operations in
                var keys = SmallList<String>()
                var values: [StoredValue?] = []
                for index in operations.indices {
                    let operation = operations[index]
                    keys.append(LogScanner.makeKey(operation.key))
                    if carriesValues {
                        values.append(
                            operation.value.map { StoredValue(ValueBytes(copying: $0), kind: operation.kind) })
                    }
                }
                sets.append(
                    ChangeSet(keys: keys, values: values, writeID: writeID, isExternal: false, sequence: sequence))
                sequence += 1
            }
        }
        // NB: a span whose records all verify holds `count` of them; one that stops early, fewer;
        // bytes written over by another program cannot make more commits than were made.
        if sets.count > count { sets.removeLast(sets.count - count) }
        let unread = count - sets.count
        guard unread > 0 else { return sets }
        let every = everyKey()
        let keys = SmallList<String>(every.map(\.key))
        let values = carriesValues ? every.map(\.value) : []
        for _ in 0..<unread {
            sets.append(ChangeSet(keys: keys, values: values, writeID: nil, isExternal: false, sequence: sequence))
            sequence += 1
        }
        return sets
    }
}

/// Where a delivery's ``PendingChanges`` are kept, and the lock that guards them.
protocol PendingChangesLock: AnyObject, Sendable {
    func withPendingChanges<R>(_ body: (inout PendingChanges) -> R) -> R
    /// Every key the store holds, with its value: what a change that no longer reads back from
    /// the log names (see ``LoggedChanges/changeSets(everyKey:)``).
    func everyKey() -> [(key: String, value: StoredValue?)]
}

extension Locked: PendingChangesLock where State == PendingChanges {
    func withPendingChanges<R>(_ body: (inout PendingChanges) -> R) -> R { withLock(body) }
    func everyKey() -> [(key: String, value: StoredValue?)] { [] }
}
