/// What went wrong with the store and what was done about it. One of the components of
/// ``EngineState``.
///
/// **Owns** why the store is unavailable (``failure``), the damage found and set aside
/// (``reports``), the remains of a dead append cut off and waiting to be copied to `quarantine/`
/// (``deadTail``), and a data loss not reported yet (``pendingDataLoss``). Where the remains are
/// found and cut is the log's business (``LogState/deadTailEnd``, Engine+DeadTail.swift).
///
/// **Guarded by** the engine's lock (`Engine.state`). A repair reads and rewrites files under it
/// (never under the commit lock, except for the rename and publish of its result); the copies
/// to `quarantine/` are made once every lock is released. **Never**, under the lock: log (a
/// failure is noted, see ``EngineState/note(_:level:file:function:line:)``) or call out.
struct RecoveryState {
    /// Why the last attempt to open failed; `nil` while open or never tried.
    var failure: TinyStorageError?
    /// Damage found and set aside so far.
    var reports: [TinyStorage.RecoveryReport] = []
    /// Bytes of an append's remains, cut off under the commit lock, to be copied to
    /// `quarantine/` once it is released (see `Engine.setAsideDeadTail`).
    var deadTail: (offset: Int, bytes: [UInt8])?
    /// Data known to be durable that a repair found damaged or missing: reported once, by the
    /// next call that can throw (see `RecoveryReport.isDataLoss`).
    var pendingDataLoss: TinyStorageError?
}
