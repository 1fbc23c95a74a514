import CTinyStorageShims

/// Which of a store's locks the current thread holds.
///
/// The engine promises that nothing slow or foreign runs under its locks: no logger call, no user
/// closure, no flush, no compaction rewrite (an iOS app suspended while holding a file lock in a
/// shared container is killed by the system; a logger that uses the store would deadlock). The
/// promise is kept by the code's structure; this witness lets tests observe it from the seams (a
/// logger, an `update` closure, a `FileIO` fault injector that sees every system call). A
/// per-thread counter costs about a nanosecond per lock.
enum LockWitness {
    enum Lock: Int32 {
        /// The engine's in-process lock around its state.
        case engine = 0
        /// The cross-process lock every commit takes.
        case file = 1
    }

    @inline(__always)
    static func enter(_ lock: Lock) { ts_lock_witness_enter(lock.rawValue) }

    @inline(__always)
    static func leave(_ lock: Lock) { ts_lock_witness_leave(lock.rawValue) }

    /// Whether the current thread holds `lock` of any store.
    static func isHolding(_ lock: Lock) -> Bool { ts_lock_witness_depth(lock.rawValue) > 0 }

    /// Whether the current thread holds any store's lock.
    static var isHoldingAnyLock: Bool { isHolding(.engine) || isHolding(.file) }
}
