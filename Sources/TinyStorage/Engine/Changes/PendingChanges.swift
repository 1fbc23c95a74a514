import Foundation

// Where a change is queued: every commit and catch-up queues its change here, under the
// engine's lock, through `Engine.enqueueChange` (Engine+Changes.swift); ChangeDelivery.swift
// drains the queue and announces it, with no lock of the store held.
//
// Owns: the queue of changes not yet drained (``PendingChanges``), their numbering, and whether
// they carry values. Guarded by the engine's lock (it is ``EngineState/changes``); the delivery
// reaches it through ``PendingChangesLock``. Under it, code may append to the queue and ask for
// a drain (`ChangeDelivery.scheduleDrain`, which only schedules); it never calls the listener,
// posts a notification, or runs an observer.

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
                            operation.value.map {
                                StoredValue(ValueBytes(copying: $0), kind: operation.kind, deadline: operation.deadline)
                            })
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
