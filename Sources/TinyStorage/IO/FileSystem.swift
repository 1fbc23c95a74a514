#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The system calls a store makes, one requirement per call, with no policy: no retries, no
/// checks, no loops. ``FileIO`` adds those on top, once, for every backend.
///
/// Two backends exist: ``SystemFileSystem`` (the real calls) and, in the tests, a simulated disk
/// with a volatile write cache that can be crashed at any operation. Every name is opened
/// relative to an open directory, so a path component swapped for a symbolic link between two
/// calls cannot redirect a later one.
///
/// Each requirement returns the call's result, or the `errno` it failed with; `EINTR` is
/// returned, not retried.
protocol FileSystem: Sendable {
    /// `open(path, O_DIRECTORY | O_CLOEXEC)` (Linux: `O_PATH`; elsewhere `O_RDONLY`): the only
    /// path-based open, used for the folder that holds a store (which may be reached through links
    /// the app set up). The descriptor is used only as the base of `*at` calls.
    func openDirectory(atPath path: String) -> Result<Int32, Errno>
    /// `mkdir(path, mode)`: the last component of `path` only.
    func makeDirectory(atPath path: String, mode: mode_t) -> Result<Void, Errno>
    /// `openat(directory, name, flags | O_CLOEXEC, mode)`.
    func open(in directory: Int32, _ name: String, flags: Int32, mode: mode_t) -> Result<Int32, Errno>
    /// `mkdirat(directory, name, mode)`, `path` being where that is. New directories give the
    /// files created in them no data protection (see ``DataProtection``).
    func makeDirectory(in directory: Int32, _ name: String, path: String, mode: mode_t) -> Result<Void, Errno>
    /// The data protection class of the item at `path` itself, a link not followed (see
    /// ``ProtectionClass``): for a directory, the class it gives new files. ``ProtectionClass/none``
    /// where there is no data protection (Linux, but for its stand-in with Apple semantics; macOS,
    /// the Simulator, an external volume).
    func protectionClass(ofItemAt path: String) -> Result<ProtectionClass, Errno>
    /// Gives the item at `path` the class ``ProtectionClass/none`` (see ``DataProtection``). A file
    /// whose class keeps it closed while the device is locked cannot be changed then (`EPERM`).
    func removeDataProtection(ofItemAt path: String) -> Result<Void, Errno>
    /// `fstatat(directory, name, AT_SYMLINK_NOFOLLOW)`: what is at `name` itself, link or not.
    func status(in directory: Int32, _ name: String) -> Result<FileStatus, Errno>
    /// `fstat(fd)`.
    func status(_ fd: Int32) -> Result<FileStatus, Errno>
    /// `close(fd)`.
    func close(_ fd: Int32) -> Result<Void, Errno>
    /// One `pread(fd, buffer, count, offset)`; returns the bytes read (0 at end of file).
    func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Result<Int, Errno>
    /// One `pwrite(fd, bytes, count, offset)`; returns the bytes written.
    func write(_ fd: Int32, from bytes: UnsafeRawBufferPointer, at offset: Int) -> Result<Int, Errno>
    /// Flushes `fd` to stable storage: Linux `fdatasync(2)` (`dataOnly`) or `fsync(2)`; Apple
    /// platforms `fcntl(F_FULLFSYNC)`, which also flushes the drive's cache, and which some file
    /// systems do not support (exFAT answers `ENOTTY`; SMB `ENOTSUP` or `EINVAL`).
    func sync(_ fd: Int32, dataOnly: Bool) -> Result<Void, Errno>
    /// `fsync(2)`: on Apple platforms the data reaches the drive, perhaps only its cache. Where
    /// ``sync(_:dataOnly:)`` is unsupported, as far as a file can be flushed (see
    /// `FileIO.syncWhereSupported`).
    func syncToDrive(_ fd: Int32) -> Result<Void, Errno>
    /// `ftruncate(fd, length)`.
    func truncate(_ fd: Int32, to length: Int) -> Result<Void, Errno>
    /// Allocates disk blocks for `offset..<offset + length`, growing the file if needed, without
    /// changing existing bytes: Linux `posix_fallocate(3)`; Apple `fcntl(F_PREALLOCATE)` then
    /// `ftruncate(2)`. Afterwards, writes in that range cannot fail for lack of space.
    func allocate(_ fd: Int32, offset: Int, length: Int) -> Result<Void, Errno>
    /// `renameat(directory, source, directory, destination)`.
    func rename(in directory: Int32, _ source: String, to destination: String) -> Result<Void, Errno>
    /// Renames `source` to `destination` inside `directory` only if `destination` does not
    /// exist (`EEXIST` otherwise): Linux `renameat2(RENAME_NOREPLACE)`, Apple
    /// `renameatx_np(RENAME_EXCL)`. `EINVAL` or `ENOTSUP` when the file system cannot.
    func renameWithoutReplacing(in directory: Int32, _ source: String, to destination: String) -> Result<Void, Errno>
    /// `unlinkat(directory, name, 0)`.
    func unlink(in directory: Int32, _ name: String) -> Result<Void, Errno>
    /// The names in an open directory, without `.` and `..` (`fdopendir(3)` on a duplicate).
    func entries(of directory: Int32) -> Result<[String], Errno>
    /// `flock(fd, LOCK_SH)`, `flock(fd, LOCK_EX)` or `flock(fd, LOCK_UN)`: waits for a lock another
    /// open file description holds, or with `waiting: false` (`LOCK_NB`) fails with `EWOULDBLOCK`.
    func lock(_ fd: Int32, _ mode: FileLockMode, waiting: Bool) -> Result<Void, Errno>
    /// `mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)`.
    func map(_ fd: Int32, length: Int) -> Result<UnsafeMutableRawPointer, Errno>
    /// `mmap(nil, length, PROT_READ, MAP_SHARED, fd, 0)`: for a file open read-only; a write
    /// through the mapping faults.
    func mapReadOnly(_ fd: Int32, length: Int) -> Result<UnsafeRawPointer, Errno>
    /// `munmap(address, length)`.
    func unmap(_ address: UnsafeMutableRawPointer, length: Int)
    /// Faults in the pages of `length` bytes at `offset` of the shared mapping at `address` as a
    /// write would, changing no byte, so that a later write there takes no page fault: Linux
    /// `madvise(MADV_POPULATE_WRITE)` (kernel 5.14 and later); `EINVAL` from older kernels,
    /// `EFAULT` for pages past the file's end, `ENOTSUP` elsewhere. `offset` is a multiple of
    /// the page size.
    func prefaultForWriting(_ address: UnsafeMutableRawPointer, offset: Int, length: Int) -> Result<Void, Errno>
    /// Called before `length` bytes at `offset` of the shared mapping at `address` are written,
    /// which is no system call: the real file system does nothing, and a simulated one counts
    /// the write as a change to the disk, where it can crash (then the bytes are not written).
    func willWriteMapping(_ address: UnsafeMutableRawPointer, offset: Int, length: Int) -> Result<Void, Errno>
    /// The type of the file system holding `fd` (Linux `fstatfs(2)`'s `f_type`); `ENOTSUP`
    /// elsewhere.
    func fileSystemType(_ fd: Int32) -> Result<Int64, Errno>
    /// Makes the memory at `address` (in a shared mapping) a robust, process-shared,
    /// error-checking mutex (`pthread_mutex_init` with `PTHREAD_PROCESS_SHARED`,
    /// `PTHREAD_MUTEX_ROBUST`, `PTHREAD_MUTEX_ERRORCHECK`). Linux only: `ENOTSUP` elsewhere.
    func initializeSharedMutex(at address: UnsafeMutableRawPointer) -> Result<Void, Errno>
    /// `pthread_mutex_lock` on that mutex, waiting as needed. `.ownerDied` (`EOWNERDEAD`): the
    /// lock is taken, and its previous owner died holding it.
    func lockSharedMutex(at address: UnsafeMutableRawPointer) -> Result<MutexAcquisition, Errno>
    /// `pthread_mutex_consistent`: after `.ownerDied`, once what the dead owner left is repaired.
    func markSharedMutexConsistent(at address: UnsafeMutableRawPointer) -> Result<Void, Errno>
    /// `pthread_mutex_unlock`.
    func unlockSharedMutex(at address: UnsafeMutableRawPointer)
    /// The effective user ID of this process (`geteuid(2)`), which must own a store's files.
    var effectiveUserID: UInt32 { get }
    /// What tells this boot of the system from the previous ones: the state shared between
    /// processes in a lock file's page is only trusted when it was written during this boot.
    var bootIdentity: BootIdentity { get }
}

/// How ``FileSystem/lockSharedMutex(at:)`` got the lock.
enum MutexAcquisition: Sendable, Equatable {
    /// Released by its previous owner.
    case acquired
    /// Its previous owner died holding it (`EOWNERDEAD`): whatever that owner was changing may be
    /// half done. The lock is held; it stays usable once marked consistent.
    case ownerDied
}

/// Tells one boot of the system from another: a random UUID the kernel makes as it boots (Linux:
/// `/proc/sys/kernel/random/boot_id`; Apple platforms: the `kern.bootsessionuuid` sysctl), which
/// setting the clock does not move, as it moves the time of the boot (`kern.boottime`).
struct BootIdentity: Sendable, Hashable {
    var high: UInt64
    var low: UInt64

    init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// The identity a boot UUID's text gives ("6fd5a44b-35f4-4ad4-a9b9-6a9c7e5b9e5f", either
    /// case, perhaps followed by a line feed or NUL bytes, as both kernels hand it over), or `nil`
    /// for anything else.
    init?(uuidText bytes: some Collection<UInt8>) {
        var digits: [UInt8] = []
        var dashes = 0
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "-"): dashes += 1
            case 0, 0x0A: break
            default: digits.append(byte)
            }
        }
        let trailing = bytes.drop { $0 != 0 && $0 != 0x0A }
        guard dashes == 4, digits.count == 32, trailing.allSatisfy({ $0 == 0 || $0 == 0x0A }),
            let high = UInt64(String(decoding: digits.prefix(16), as: UTF8.self), radix: 16),
            let low = UInt64(String(decoding: digits.suffix(16), as: UTF8.self), radix: 16)
        else { return nil }
        self.init(high: high, low: low)
    }
}

/// What ``FileSystem/status(in:_:)`` and ``FileSystem/status(_:)`` report.
struct FileStatus: Sendable, Equatable {
    /// The kinds of file a store may find at one of its names.
    enum Kind: String, Sendable {
        case regular = "a regular file"
        case directory = "a directory"
        case symbolicLink = "a symbolic link"
        case fifo = "a FIFO (named pipe)"
        case socket = "a socket"
        case device = "a device"
        case other = "an unknown kind of file"
    }

    var kind: Kind
    var size: Int
    var device: UInt64
    var inode: UInt64
    /// How many names (hard links) the file has.
    var linkCount: Int
    var owner: UInt32
    /// The permission bits, `st_mode & 0o7777`.
    var permissions: UInt32

    var isRegularFile: Bool { kind == .regular }

    init(
        kind: Kind, size: Int, device: UInt64 = 0, inode: UInt64 = 0, linkCount: Int = 1, owner: UInt32 = 0,
        permissions: UInt32 = 0o600
    ) {
        self.kind = kind
        self.size = size
        self.device = device
        self.inode = inode
        self.linkCount = linkCount
        self.owner = owner
        self.permissions = permissions
    }

    init(_ info: stat) {
        let kind: Kind =
            switch info.st_mode & S_IFMT {
            case S_IFREG: .regular
            case S_IFDIR: .directory
            case S_IFLNK: .symbolicLink
            case S_IFIFO: .fifo
            case S_IFSOCK: .socket
            case S_IFCHR, S_IFBLK: .device
            default: .other
            }
        self.init(
            kind: kind, size: Int(clamping: info.st_size), device: UInt64(truncatingIfNeeded: info.st_dev),
            inode: UInt64(truncatingIfNeeded: info.st_ino), linkCount: Int(info.st_nlink),
            owner: UInt32(info.st_uid), permissions: UInt32(info.st_mode) & 0o7777)
    }

    /// Whether both describe the same file (device and inode).
    func isSameFile(as other: FileStatus) -> Bool {
        device == other.device && inode == other.inode
    }
}

/// What `flock(2)` is asked for.
enum FileLockMode: Sendable {
    /// `LOCK_SH`: any number of descriptors may hold it, none while one holds ``exclusive``.
    case shared
    /// `LOCK_EX`: one descriptor at a time.
    case exclusive
    /// `LOCK_UN`: releases what the descriptor holds.
    case unlocked
}

extension FileSystem {
    /// ``sync(_:dataOnly:)``: test doubles have one kind of flush.
    func syncToDrive(_ fd: Int32) -> Result<Void, Errno> { sync(fd, dataOnly: false) }
}
