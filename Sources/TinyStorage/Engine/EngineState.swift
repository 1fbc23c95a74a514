/// Everything the engine knows, guarded by one lock (`Engine.state`, a ``Locked``): one value
/// per component, each owning its concern and documenting it in its own file.
///
/// | Component | Owns | File |
/// | --- | --- | --- |
/// | ``log`` | the data file, where the log ends, appends | Log/LogState.swift |
/// | ``index`` | every key's entry, built or pending, decoded values | Index/IndexState.swift |
/// | ``coordination`` | the lock file, what of its page this state has seen | Coordination/CoordinationState.swift |
/// | ``recovery`` | unavailability, repairs, dead tails to set aside, data loss to report | Recovery/RecoveryState.swift |
/// | ``changes`` | the changes queued for the listener, in commit order | Changes/ChangeDelivery.swift |
/// | ``expiry`` | which expiries were announced, the next deadline, the wake asked for | Expiry/ExpiryState.swift |
///
/// Durability (flushes, group commit, the durable window) keeps no state here: a flush runs with
/// no lock held, from what a commit hands it (see Durability/Engine+Flushing.swift).
///
/// ## The lock rules, for every component
///
/// - The state is entered through `Engine.withState(_:)`, which logs what was noted once the lock
///   is released; only the read path's hot spots (`cachedValue`, `cachedInt`, `cache`) enter the
///   lock directly, and they call nothing.
/// - The cross-process commit lock is taken only inside the engine's lock, through
///   `Engine.withFileLock` (Commit/Engine+Locking.swift): in-process lock first, then the
///   file lock, never the other way round.
/// - Under the engine's lock, code may read the store's files, and under the commit lock write
///   records to the data file and publish them on the lock page. A repair, an open and a cut
///   write and flush files under the engine's lock, never under the commit lock but for the
///   rename and publish of what they wrote.
/// - Under either lock, code never calls the user's code (a `Codable` conformance, an `update`
///   closure, a listener, an observer, a notification), never calls the logger (it notes, with
///   ``note(_:level:file:function:line:)``), never waits for another thread of the store, and
///   never flushes under the commit lock. `LockContractTests` checks each of these through the
///   seams (the logger, the file system, the user's types and closures).
struct EngineState {
    var log = LogState()
    var index = IndexState()
    var coordination = CoordinationState()
    var recovery = RecoveryState()
    var changes = PendingChanges()
    var expiry = ExpiryState()
    /// Messages noted while a lock was held, logged once it is released (see `Engine.withState`).
    var deferredLogs: [DeferredLog] = []
    /// An in-memory store: no files, always open, nothing to catch up with.
    var inMemory = false

    var isOpen: Bool { inMemory || log.dataFile != nil }
    /// Whether no other process has committed since this state was last brought up to date (a
    /// hint from the lock page, see ``CoordinationState``).
    var isCurrent: Bool { inMemory || coordination.file?.sequence == coordination.seenSequence }

    /// Logs `message` once the engine's lock is released: a logger is never called under a lock.
    mutating func note(
        _ message: String, level: TinyStorageLogLevel, file: String = #fileID, function: String = #function,
        line: Int = #line
    ) {
        deferredLogs.append(DeferredLog(message: message, level: level, file: file, function: function, line: line))
    }
}

/// A message noted under a lock, with the call site that noted it, logged once the lock is released.
struct DeferredLog {
    var message: String
    var level: TinyStorageLogLevel
    var file: String
    var function: String
    var line: Int
}
