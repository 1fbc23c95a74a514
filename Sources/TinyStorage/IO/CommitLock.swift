/// The cross-process lock every commit takes, held for the append and publish only (see
/// ``CoordinationFile``).
///
/// Two kinds, one per platform family, chosen when the lock page is opened:
/// - Linux: ``SharedMutexCommitLock``, a robust mutex in the lock file's shared page: no system
///   call when nobody else holds it, and a holder's death is reported to the next one.
/// - Apple platforms: ``FileCommitLock``, `flock(2)` on the lock file. Apple platforms have no
///   robust mutex, and the system suspends apps: a suspended app holding a user-space lock would
///   block its extensions indefinitely, while the kernel lets go of a `flock` with the process.
protocol CommitLock: Sendable {
    /// Takes the lock, waiting for its holder. `.ownerDied` when the previous holder died
    /// holding it: whatever it was changing may be half done.
    func lock() -> Result<MutexAcquisition, Errno>
    /// Marks the lock usable again after `.ownerDied`, once the caller repaired what it could.
    func markConsistent()
    /// Releases the lock.
    func unlock()
}

/// `flock(2)` on the lock file: taken and released with one system call each. A process that
/// dies holding it releases it, so `.ownerDied` never happens: the next commit finds a torn tail
/// past the published length, which loading cuts off.
final class FileCommitLock: CommitLock {
    let fd: Int32
    let io: FileIO

    init(fd: Int32, io: FileIO) {
        self.fd = fd
        self.io = io
    }

    func lock() -> Result<MutexAcquisition, Errno> {
        io.lock(fd, exclusive: true).map { .acquired }
    }

    func markConsistent() {}

    func unlock() { _ = io.lock(fd, exclusive: false) }
}
