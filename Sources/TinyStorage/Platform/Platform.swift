import CTinyStorageShims

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Every decision that differs between Linux and Apple platforms, as one value the engine and its
/// file layer are given (SPEC §7), so that each decision is taken in shared code, where CI runs it.
///
/// ``current`` is ``linux`` on Linux and ``apple`` on Apple platforms, and ``apple`` on Linux too
/// when the package is built with the compilation condition `TINYSTORAGE_APPLE_SEMANTICS`
/// (`swift test -Xswiftc -DTINYSTORAGE_APPLE_SEMANTICS`, which `.ci/run` runs): then every decision
/// an iPhone takes runs here, through the same code, and only the adapters over Apple-only APIs
/// are replaced, by Linux stand-ins with Apple's semantics (CONTRIBUTING.md lists them):
///
/// | decision | Linux | Apple platforms |
/// |---|---|---|
/// | commit lock, append | robust mutex in the lock page; appends copied into a mapping (ext4, XFS, tmpfs) | `flock(2)` on the lock file; one `pwrite(2)` per append |
/// | other processes' commits noticed | futex in the lock page, and inotify on the folder's names | vnode events on the folder and the data file |
/// | a directory opened by path | `O_PATH` (search permission only) | `O_SEARCH` (search permission only) |
/// | a denied access | `EACCES` | `EPERM` from the sandbox, `EACCES` elsewhere |
/// | a full flush | `fdatasync(2)` | `fcntl(F_FULLFSYNC)`; unsupported on some file systems |
/// | the boot a page was written in | `/proc/sys/kernel/random/boot_id` | `kern.bootsessionuuid` |
/// | data protection | none (with Apple semantics: `SimulatedDataProtection`, classes in an extended attribute, a simulated locked device) | every file and folder of the store: `FileProtectionType.none`, set before it is opened |
struct Platform: Sendable {
    /// The cross-process commit lock, and so how records are appended (see `CommitLock`).
    enum CommitLock: Sendable {
        /// A robust, process-shared mutex in the lock file's page; appends through a mapping of
        /// space allocated ahead, where the file system keeps it (see `AppendMapping`).
        case sharedMutex
        /// `flock(2)` on the lock file; each append one `pwrite(2)`.
        case fileLock
    }

    /// How a store learns of other processes' commits and replaced files.
    enum FileEvents: Sendable {
        /// inotify on the folder's names and attributes, and the lock page's futex signal for
        /// commits (no event per write).
        case namesAndSignal
        /// vnode events (kqueue) on the folder and on the data file: a commit is seen through the
        /// data file's write events, then the watcher's later looks.
        case vnode
    }

    var commitLock: CommitLock
    var fileEvents: FileEvents
    /// The `open(2)` flags that open a directory by path for `*at` calls only, so that passing
    /// through a folder needs search permission, not read permission (`O_PATH`, `O_SEARCH`).
    var directorySearchFlags: Int32
    /// Whether a denied access may answer `EPERM` rather than `EACCES` (the iOS sandbox denies
    /// with `EPERM`): every caller that tolerates one tolerates both. With Apple semantics on
    /// Linux, the file layer answers every `EACCES` as `EPERM`, so no caller can forget it.
    var deniesWithNotPermitted: Bool
    /// Whether the store's files and folders are kept free of data protection (readable before
    /// the first unlock after a reboot): through `DataProtection` on Apple's devices, and its
    /// stand-in with Apple semantics on Linux.
    var removesDataProtection: Bool

    /// Linux.
    static let linux = Platform(
        commitLock: .sharedMutex, fileEvents: .namesAndSignal, directorySearchFlags: Self.pathOnlyFlag | O_DIRECTORY,
        deniesWithNotPermitted: false, removesDataProtection: false)

    /// Apple platforms (iOS, iPadOS, macOS, tvOS, watchOS, visionOS); on Linux, their semantics,
    /// with stand-ins for the facilities only Apple's systems have.
    static let apple = Platform(
        commitLock: .fileLock, fileEvents: .vnode, directorySearchFlags: Self.searchOnlyFlag | O_DIRECTORY,
        deniesWithNotPermitted: true, removesDataProtection: true)

    /// This build's platform (see the type's documentation).
    static let current: Platform = {
        #if canImport(Darwin) || TINYSTORAGE_APPLE_SEMANTICS
        return .apple
        #else
        return .linux
        #endif
    }()

    /// Whether this build takes Apple's decisions (on an Apple platform, or on Linux built with
    /// `TINYSTORAGE_APPLE_SEMANTICS`).
    static var isAppleSemantics: Bool { current.commitLock == .fileLock }

    /// `O_PATH`: Linux only; 0 elsewhere (`O_SEARCH` is Darwin's).
    private static var pathOnlyFlag: Int32 { ts_open_path_flag() }

    /// `O_SEARCH` without `O_DIRECTORY` where Apple defines it (`O_EXEC`, macOS 13, iOS 16: see
    /// man 2 open); on Linux, standing in for it, `O_PATH`, which has the same meaning for a
    /// directory.
    private static var searchOnlyFlag: Int32 {
        #if canImport(Darwin)
        return O_EXEC
        #else
        return pathOnlyFlag
        #endif
    }
}
