import CTinyStorageShims

/// Linux: the commit lock as a robust, process-shared `pthread_mutex_t` in the lock file's
/// shared page (see ``CommitLock``).
///
/// Uncontended, taking and releasing it are two atomic operations: no system call. When its
/// holder dies (`kill -9`, a crash), the kernel marks it, and the next `pthread_mutex_lock`
/// returns `EOWNERDEAD` with the lock taken instead of waiting forever; ``CoordinationFile``
/// then has the data file checked from its start, as after any crash, before the lock is marked
/// consistent.
///
/// The mutex lives at ``mutexOffset`` in the page, beside a stamp saying during which boot it was
/// initialized (``stampOffset``: magic, then the boot). A page without that stamp (a lock file
/// written before this lock existed, or never used) or with an earlier boot's (whose bytes may
/// hold a lock by a thread that no longer exists, or an unrelated one with the same ID) is
/// initialized again, under `flock(2)` so two openers never both do it, and only then stamped.
final class SharedMutexCommitLock: CommitLock, @unchecked Sendable {
    // @unchecked: `mutex` points into the shared page, which the CoordinationFile holding this
    // lock keeps mapped; it is only ever used through the pthread calls, made for any thread.
    /// Where the stamp starts: magic (u64), then the boot (two u64).
    static let stampOffset = 80
    /// Where the mutex starts, 64-byte aligned; it may take up to ``mutexCapacity`` bytes.
    static let mutexOffset = 128
    static let mutexCapacity = 64
    private static let magic: UInt64 = 0x0100_5845_5455_4D53  // "SMUTEX\0\u{1}" little-endian

    private let mutex: UnsafeMutableRawPointer
    private let io: FileIO

    private init(mutex: UnsafeMutableRawPointer, io: FileIO) {
        self.mutex = mutex
        self.io = io
    }

    /// The mutex in `page` (the lock file open on `fd`), initialized first if this boot has not
    /// done so yet; `nil` where there is no robust mutex (the caller uses `flock` instead).
    ///
    /// - Throws: the error of `flock` or of `pthread_mutex_init`.
    ///
    /// - Parameter alone: Whether no other process has the store open, nor can open it meanwhile
    ///   (the caller holds the folder's exclusive lock, see `CoordinationFile`): then the mutex
    ///   is made again whatever its stamp says, since nobody can hold it, whatever its bytes say
    ///   (a page put back from a copy, or by a disk that lost its cache).
    static func attach(
        to page: UnsafeMutableRawPointer, fd: Int32, io: FileIO, boot: BootIdentity, alone: Bool = false
    ) throws(Errno) -> SharedMutexCommitLock? {
        #if os(Linux) || os(Android)
        let size = ts_shared_mutex_size()
        guard size > 0, size <= mutexCapacity else { return nil }
        let lock = SharedMutexCommitLock(mutex: page + mutexOffset, io: io)
        if alone {
            try initialize(page, boot: boot, io: io)
            return lock
        }
        if isStamped(page, boot: boot) { return lock }
        try io.lock(fd, exclusive: true).get()
        defer { _ = io.lock(fd, exclusive: false) }
        if isStamped(page, boot: boot) { return lock }  // another opener got there first
        try initialize(page, boot: boot, io: io)
        return lock
        #else
        return nil
        #endif
    }

    /// Makes the mutex, then stamps it with `boot`. Call where no other opener can do the same.
    private static func initialize(_ page: UnsafeMutableRawPointer, boot: BootIdentity, io: FileIO) throws(Errno) {
        ts_atomic_store_u64(page + stampOffset, 0)
        try io.initializeSharedMutex(at: page + mutexOffset).get()
        ts_atomic_store_u64(page + stampOffset + 8, boot.high)
        ts_atomic_store_u64(page + stampOffset + 16, boot.low)
        ts_atomic_store_u64(page + stampOffset, magic)  // NB: last, so a half-made mutex is never used
    }

    private static func isStamped(_ page: UnsafeMutableRawPointer, boot: BootIdentity) -> Bool {
        ts_atomic_load_u64(page + stampOffset) == magic && ts_atomic_load_u64(page + stampOffset + 8) == boot.high
            && ts_atomic_load_u64(page + stampOffset + 16) == boot.low
    }

    func lock() -> Result<MutexAcquisition, Errno> { io.lockSharedMutex(at: mutex) }

    func markConsistent() { _ = io.markSharedMutexConsistent(at: mutex) }

    func unlock() { io.unlockSharedMutex(at: mutex) }
}
