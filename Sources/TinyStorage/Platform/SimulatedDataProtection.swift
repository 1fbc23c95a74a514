#if os(Linux)
import CTinyStorageShims

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Apple's data protection on Linux, for builds with Apple semantics (`TINYSTORAGE_APPLE_SEMANTICS`):
/// the stand-in ``SystemFileSystem`` uses where Apple's devices use ``DataProtection``, so that
/// what the store decides about protection classes runs, and is tested, where CI runs.
///
/// It follows Apple's rules as far as they are documented ("Encrypting Your App's Files",
/// `FileProtectionType`):
/// - An item's class is the name of a ``ProtectionClass``, kept in its extended attribute
///   `user.tinystorage.protection-class`. An item without one, or on a file system without
///   extended attributes (`ENOTSUP`), is ``ProtectionClass/none``: nothing on Linux is protected
///   unless a test says so.
/// - A file or directory created takes the class its directory gives new files; a directory the
///   store makes unprotected (``makeUnprotectedDirectory(atPath:in:_:)``) then gets
///   ``ProtectionClass/none``, as Foundation sets `.protectionKey` after `mkdir(2)`.
/// - While the ``device`` is locked (since it started: before its first unlock), a file of any
///   class but ``ProtectionClass/none`` cannot be opened, nor can a file be created in a directory
///   that gives new files a class other than ``ProtectionClass/none`` or
///   ``ProtectionClass/completeUnlessOpen``, nor can a protected file's class be changed (its key
///   is locked away): `EPERM`, as iOS answers. Directories open, and their classes change, as
///   ever: a directory's class only says what new files get.
/// - Descriptors already open stay usable: locking a device under an open file is not modelled.
struct SimulatedDataProtection: Sendable {
    /// The extended attribute that holds an item's class.
    static let attributeName = "user.tinystorage.protection-class"

    /// Whether the simulated device is locked.
    let device: SimulatedDevice

    /// - Parameter device: The device whose lock this stand-in obeys; by default a new one, never
    ///   locked.
    init(device: SimulatedDevice = SimulatedDevice()) {
        self.device = device
    }

    /// The class of the item at `path` itself, a link not followed (`lgetxattr(2)`).
    func protectionClass(ofItemAt path: String) -> Result<ProtectionClass, Errno> {
        var buffer = [UInt8](repeating: 0, count: 64)
        let length = buffer.withUnsafeMutableBytes {
            ts_get_attribute(path, Self.attributeName, $0.baseAddress, $0.count)
        }
        guard length < 0 else {
            return .success(ProtectionClass(rawValue: String(decoding: buffer.prefix(length), as: UTF8.self)))
        }
        switch Errno.current {
        case Errno(ENODATA), .notSupported: return .success(.none)
        case let error: return .failure(error)
        }
    }

    /// Gives the item at `path` the class `protection` (`lsetxattr(2)`), as
    /// `FileManager.setAttributes(_:ofItemAtPath:)` with `.protectionKey` does: `EPERM` for a
    /// protected file while the device is locked.
    func setProtectionClass(_ protection: ProtectionClass, ofItemAt path: String) -> Result<Void, Errno> {
        if device.isLocked {
            var info = stat()
            guard lstat(path, &info) == 0 else { return .failure(.current) }
            if info.st_mode & S_IFMT == S_IFREG, case .success(let current) = protectionClass(ofItemAt: path),
                current != .none
            {
                return .failure(.notPermitted)
            }
        }
        return store(protection) { ts_set_attribute(path, Self.attributeName, $0.baseAddress, $0.count) }
    }

    /// `openat(2)` as a device with data protection lets it happen: `open` makes the call, unless
    /// the device is locked and the file (or, for one to be created, the class its directory gives
    /// new files) is protected; a file it creates takes its directory's class.
    func open(
        in directory: Int32, _ name: String, flags: Int32, _ open: () -> Result<Int32, Errno>
    ) -> Result<Int32, Errno> {
        guard flags & O_DIRECTORY == 0 else { return open() }
        switch protectionClass(ofItemAt: Self.path(of: name, in: directory)) {
        case .success(let existing):
            let failsAsExisting = flags & (O_CREAT | O_EXCL) == O_CREAT | O_EXCL
            if device.isLocked, existing != .none, !failsAsExisting { return .failure(.notPermitted) }
            return open()
        case .failure(.notFound) where flags & O_CREAT != 0:
            let inherited = newFileClass(of: Self.path(of: directory))
            if device.isLocked, !inherited.allowsCreationWhileLocked { return .failure(.notPermitted) }
            let opened = open()
            if case .success(let fd) = opened, inherited != .none {
                _ = store(inherited) { ts_set_attribute_fd(fd, Self.attributeName, $0.baseAddress, $0.count) }
            }
            return opened
        case .failure:
            return open()
        }
    }

    /// After `mkdir(2)` made the directory at `path` in the one at `parentPath`: it gives new files
    /// what its parent gives them.
    func didMakeDirectory(atPath path: String, inDirectoryAt parentPath: String) {
        let inherited = newFileClass(of: parentPath)
        if inherited != .none { _ = setProtectionClass(inherited, ofItemAt: path) }
    }

    /// Makes a directory with `make` (`mkdirat(2)` of `path` in `directory`), which takes its
    /// parent's class, then gives it ``ProtectionClass/none`` and ignores a failure to, as
    /// `FileManager.createDirectory(atPath:withIntermediateDirectories:attributes:)` with
    /// `.protectionKey: .none` does (see ``DataProtection/createUnprotectedDirectory(atPath:mode:)``).
    func makeUnprotectedDirectory(
        atPath path: String, in directory: Int32, _ make: () -> Result<Void, Errno>
    ) -> Result<Void, Errno> {
        let made = make()
        guard case .success = made else { return made }
        didMakeDirectory(atPath: path, inDirectoryAt: Self.path(of: directory))
        _ = setProtectionClass(.none, ofItemAt: path)
        return made
    }

    /// The class the directory at `path` gives new files; ``ProtectionClass/none`` when unknown.
    private func newFileClass(of path: String) -> ProtectionClass {
        (try? protectionClass(ofItemAt: path).get()) ?? .none
    }

    /// Writes `protection`'s name with `set`; a file system without extended attributes holds
    /// only ``ProtectionClass/none``.
    private func store(
        _ protection: ProtectionClass, _ set: (UnsafeRawBufferPointer) -> Int32
    ) -> Result<Void, Errno> {
        let result = Array(protection.rawValue.utf8).withUnsafeBytes(set)
        guard result != 0 else { return .success(()) }
        let error = Errno.current
        return error == .notSupported && protection == .none ? .success(()) : .failure(error)
    }

    /// The path of the directory open on `fd`, for path-based calls (`/proc/self/fd/N/.`: the
    /// descriptor's link is followed, to the directory itself, whichever way it was opened).
    private static func path(of fd: Int32) -> String { "/proc/self/fd/\(fd)/." }

    /// The path of `name` in the directory open on `fd`.
    private static func path(of name: String, in fd: Int32) -> String { "/proc/self/fd/\(fd)/\(name)" }
}

/// The device ``SimulatedDataProtection`` simulates: locked, or not.
///
/// Locked means locked since it started, before its first unlock, when no protected file can be
/// opened. Each stand-in obeys its own device, so a test that locks one changes nothing for the
/// tests running beside it; the device of a ``SystemFileSystem`` made without one is never locked.
final class SimulatedDevice: Sendable {
    private let locked: Locked<Bool>

    init(locked: Bool = false) {
        self.locked = Locked(locked)
    }

    var isLocked: Bool { locked.withLock { $0 } }

    /// Locks the device: from now on protected files neither open nor are created.
    func lock() { locked.withLock { $0 = true } }

    /// Unlocks the device (its first unlock): every class opens.
    func unlock() { locked.withLock { $0 = false } }
}
#endif
