import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The engine's way to the disk: a ``FileSystem`` backend plus the policy every call needs.
///
/// Every call retries `EINTR`, reads and writes loop over short transfers, and results are
/// `Result<_, Errno>` instead of a global. Tests build a `FileIO` with a ``FaultInjector`` to make
/// any call fail on demand (`EIO` on `fsync`, `ENOSPC` in the middle of an append, a short write…),
/// or with a simulated backend that loses unsynced writes at a crash; the production value costs
/// one `nil` check per call.
struct FileIO: Sendable {
    /// The calls a ``FaultInjector`` can intercept.
    enum Call: String, Sendable, CaseIterable {
        case open, close, read, write, sync, lock, stat, rename, makeDirectory, truncate, unlink, map, allocate, list
        case prefault
        /// `fsync(2)` where the full flush (``sync``) is unsupported (see ``FileIO/syncWhereSupported(_:)``).
        case syncToDrive
    }

    /// What an injected fault does to an intercepted call.
    enum Fault: Sendable, Equatable {
        /// The call fails with this error number and does nothing.
        case fail(Errno)
        /// A write transfers at most this many bytes, then fails with `errno` (models `ENOSPC`
        /// after a partial write, or a crash after a partial write when `errno` is `nil`).
        case shortWrite(bytes: Int, then: Errno?)
        // NB: no injected `EINTR`: a fault here is returned before the call, outside its retry
        // loop. Tests interrupt calls from a backend instead, where a real `EINTR` comes from.
    }

    /// Decides, for each intercepted call and path, whether to inject a fault. The path is the
    /// full path of the name involved (`directory/name`), or `nil` for calls on a descriptor.
    typealias FaultInjector = @Sendable (_ call: Call, _ path: String?) -> Fault?

    /// The backend that makes the calls.
    let fileSystem: any FileSystem
    var injectFault: FaultInjector?

    init(fileSystem: any FileSystem = SystemFileSystem(), injectFault: FaultInjector? = nil) {
        self.fileSystem = fileSystem
        self.injectFault = injectFault
    }

    static let system = FileIO()

    /// An open directory and the path it was reached by (for messages and fault matching).
    struct Directory: Sendable {
        let fd: Int32
        let path: String

        func path(of name: String) -> String { FileIO.path(of: name, in: path) }
    }

    /// The path of `name` in the directory at `parent` (one `/` between them, also after `/`).
    static func path(of name: String, in parent: String) -> String {
        parent.hasSuffix("/") ? parent + name : parent + "/" + name
    }

    // MARK: Directories

    /// Opens the directory at `path`, following links on the way (`open(2)` with `O_DIRECTORY`).
    func openDirectory(atPath path: String) -> Result<Directory, Errno> {
        if let error = fault(.open, path) { return .failure(error) }
        return retrying { fileSystem.openDirectory(atPath: path) }.map { Directory(fd: $0, path: path) }
    }

    /// Creates `path` and its missing parents, owner-only, and flushes the directory each one was
    /// created in, so a power loss cannot take a folder (and every file later flushed inside it)
    /// away.
    ///
    /// From the leaf up, like `mkdir -p` read backwards: `mkdir(2)` of `path`, and only when its
    /// parent is missing (`ENOENT`), of the parent first. A folder that exists is never opened nor
    /// made again: an iOS app's sandbox lets it pass through the folders above its container
    /// (`/private/var/mobile/Containers/…`) but not open or list them (`EPERM`), and an app's
    /// Application Support folder does not exist until someone makes it.
    func makeDirectories(atPath path: String) -> Result<Void, Errno> {
        if let error = fault(.makeDirectory, path) { return .failure(error) }
        let make = { retrying { fileSystem.makeDirectory(atPath: path, mode: 0o700) } }
        var made = make()
        if case .failure(.notFound) = made {
            let parent = Self.parentPath(of: path)
            guard parent != path else { return .failure(.notFound) }
            if case .failure(let error) = makeDirectories(atPath: parent) { return .failure(error) }
            made = make()
        }
        switch made {
        case .success: break
        case .failure(.exists): return .success(())  // made meanwhile; the caller checks what it is
        case .failure(let error): return .failure(error)
        }
        return syncNames(inDirectoryAt: Self.parentPath(of: path))
    }

    /// The folder `path` is in: `path` without its last component (`/` for `/name`, `.` for a
    /// relative name).
    static func parentPath(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        return slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
    }

    /// Creates the directory `name` inside `directory` with `mkdirat(2)`; `EEXIST` is returned.
    func makeDirectory(in directory: Directory, _ name: String, mode: mode_t = 0o700) -> Result<Void, Errno> {
        if let error = fault(.makeDirectory, directory.path(of: name)) { return .failure(error) }
        return retrying { fileSystem.makeDirectory(in: directory.fd, name, path: directory.path(of: name), mode: mode) }
    }

    /// The data protection class of the item at `path` itself (see
    /// ``FileSystem/protectionClass(ofItemAt:)``).
    func protectionClass(ofItemAt path: String) -> Result<ProtectionClass, Errno> {
        retrying { fileSystem.protectionClass(ofItemAt: path) }
    }

    /// Gives the item at `path` no data protection (see ``FileSystem/removeDataProtection(ofItemAt:)``).
    func removeDataProtection(ofItemAt path: String) -> Result<Void, Errno> {
        retrying { fileSystem.removeDataProtection(ofItemAt: path) }
    }

    /// The names in `directory` (`readdir(3)`).
    func entries(of directory: Directory) -> Result<[String], Errno> {
        if let error = fault(.list, directory.path) { return .failure(error) }
        return fileSystem.entries(of: directory.fd)
    }

    /// Flushes `directory` itself, so that names created, renamed or removed in it are durable.
    func syncDirectory(_ directory: Directory) -> Result<Void, Errno> {
        syncNames(directory.fd, path: directory.path)
    }

    /// Flushes a directory's names. A file system that cannot flush a directory at all (`EINVAL`,
    /// `ENOTSUP`, `ENOTTY`: some network and FUSE file systems; `F_FULLFSYNC` on SMB) keeps its
    /// names as durable as it makes them, which is not an error: failing there would make every
    /// store on such a disk unusable, and no retry could succeed.
    private func syncNames(_ fd: Int32, path: String) -> Result<Void, Errno> {
        // NB: the fault seam sees the directory's path, so tests can fail directory flushes alone.
        let result =
            fault(.sync, path).map { Result<Void, Errno>.failure($0) }
            ?? retrying { fileSystem.sync(fd, dataOnly: false) }
        if case .failure(let error) = result, Self.flushUnsupported.contains(error) { return .success(()) }
        return result
    }

    /// What a file system answers a flush it cannot do at all, or not to stable storage (Apple
    /// platforms: `F_FULLFSYNC` on exFAT, SMB, WebDAV).
    static let flushUnsupported: Set<Errno> = [Errno(EINVAL), .notSupported, Errno(ENOTTY)]

    /// Flushes the directory at `path`, so that names created in it are durable, through a
    /// descriptor opened for reading: a directory opened by path is for search only (`O_PATH`,
    /// `O_SEARCH`), which cannot be flushed. A directory this user may not read (`EACCES`, or the
    /// sandbox's `EPERM`) cannot be flushed at all, which is not an error: its names stay as
    /// durable as the file system makes them.
    func syncNames(inDirectoryAt path: String) -> Result<Void, Errno> {
        let opened = openDirectory(atPath: path).flatMap { directory in
            defer { _ = close(directory.fd) }
            return open(in: directory, ".", flags: O_RDONLY | O_DIRECTORY)
        }
        switch opened {
        case .success(let fd):
            defer { _ = close(fd) }
            return syncNames(fd, path: path)
        case .failure(.accessDenied), .failure(.notPermitted): return .success(())
        case .failure(let error): return .failure(error)
        }
    }

    // MARK: Names in a directory

    /// Opens `name` in `directory` with `openat(2)`, adding `O_CLOEXEC`.
    func open(in directory: Directory, _ name: String, flags: Int32, mode: mode_t = 0o600) -> Result<Int32, Errno> {
        if let error = fault(.open, directory.path(of: name)) { return .failure(error) }
        return retrying { fileSystem.open(in: directory.fd, name, flags: flags, mode: mode) }
    }

    /// What is at `name` in `directory`, without following a link (`fstatat(2)`).
    func status(in directory: Directory, _ name: String) -> Result<FileStatus, Errno> {
        if let error = fault(.stat, directory.path(of: name)) { return .failure(error) }
        return retrying { fileSystem.status(in: directory.fd, name) }
    }

    /// Atomically replaces `destination` with `source`, both in `directory` (`renameat(2)`).
    func rename(in directory: Directory, _ source: String, to destination: String) -> Result<Void, Errno> {
        if let error = fault(.rename, directory.path(of: destination)) { return .failure(error) }
        return retrying { fileSystem.rename(in: directory.fd, source, to: destination) }
    }

    /// Renames `source` to `destination` in `directory` unless `destination` exists (`EEXIST`).
    func renameWithoutReplacing(
        in directory: Directory, _ source: String, to destination: String
    ) -> Result<
        Void, Errno
    > {
        if let error = fault(.rename, directory.path(of: destination)) { return .failure(error) }
        return retrying { fileSystem.renameWithoutReplacing(in: directory.fd, source, to: destination) }
    }

    /// Removes `name` from `directory` (`unlinkat(2)`); a missing name is not an error.
    func unlink(in directory: Directory, _ name: String) -> Result<Void, Errno> {
        if let error = fault(.unlink, directory.path(of: name)) { return .failure(error) }
        switch retrying({ fileSystem.unlink(in: directory.fd, name) }) {
        case .success, .failure(.notFound): return .success(())
        case .failure(let error): return .failure(error)
        }
    }

    // MARK: Descriptors

    /// Closes `fd` with `close(2)`. `EINTR` is not retried: on Linux the descriptor is gone anyway.
    @discardableResult
    func close(_ fd: Int32) -> Result<Void, Errno> {
        if let error = fault(.close, nil) { return .failure(error) }
        return fileSystem.close(fd)
    }

    /// Reads up to `count` bytes at `offset` with `pread(2)`, looping until `count` bytes or end
    /// of file. Returns the bytes read (fewer than `count` only at end of file).
    func read(_ fd: Int32, count: Int, at offset: Int) -> Result<[UInt8], Errno> {
        if let error = fault(.read, nil) { return .failure(error) }
        var buffer = [UInt8](repeating: 0, count: count)
        let result = buffer.withUnsafeMutableBytes { readFully(fd, into: $0, at: offset) }
        return result.map { done in
            if done < count { buffer.removeSubrange(done...) }
            return buffer
        }
    }

    /// Like ``read(_:count:at:)``, into `Data` (one allocation, no copy).
    func readData(_ fd: Int32, count: Int, at offset: Int) -> Result<Data, Errno> {
        if let error = fault(.read, nil) { return .failure(error) }
        guard count > 0 else { return .success(Data()) }
        // NB: not `Data(count:)`, which zero-fills every byte before the read overwrites it: on
        // open, that is the whole data file written once more.
        guard let bytes = malloc(count) else { return .failure(Errno(ENOMEM)) }
        switch readFully(fd, into: UnsafeMutableRawBufferPointer(start: bytes, count: count), at: offset) {
        case .success(let done):
            return .success(Data(bytesNoCopy: bytes, count: done, deallocator: .free))
        case .failure(let error):
            free(bytes)
            return .failure(error)
        }
    }

    /// `pread(2)` into `buffer` until it is full or the file ends; returns the bytes read.
    private func readFully(
        _ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int
    ) -> Result<Int, Errno> {
        var done = 0
        while done < buffer.count {
            let rest = UnsafeMutableRawBufferPointer(rebasing: buffer[done...])
            switch retrying({ fileSystem.read(fd, into: rest, at: offset + done) }) {
            case .success(0): return .success(done)
            case .success(let count): done += count
            case .failure(let error): return .failure(error)
            }
        }
        return .success(done)
    }

    /// Writes all of `bytes` at `offset` with `pwrite(2)`, looping over short writes.
    func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int) -> Result<Void, Errno> {
        var limit = bytes.count
        var failure: Errno?
        if let injected = injected(.write, nil) {
            switch injected {
            case .fail(let error): return .failure(error)
            case .shortWrite(let count, let error):
                limit = min(limit, count)
                failure = error ?? .ioError
            }
        }
        var done = 0
        while done < limit {
            let rest = UnsafeRawBufferPointer(rebasing: bytes[done..<limit])
            switch retrying({ fileSystem.write(fd, from: rest, at: offset + done) }) {
            case .success(let count): done += count
            case .failure(let error): return .failure(error)
            }
        }
        if let failure { return .failure(failure) }
        return .success(())
    }

    /// Flushes `fd` to stable storage (see ``FileSystem/sync(_:dataOnly:)``), or fails: for what
    /// was promised durable (`.immediate` commits, `synchronize()`, the durable mark).
    func sync(_ fd: Int32, dataOnly: Bool = false) -> Result<Void, Errno> {
        if let error = fault(.sync, nil) { return .failure(error) }
        return retrying { fileSystem.sync(fd, dataOnly: dataOnly) }
    }

    /// Flushes `fd` to stable storage, or, on a file system that has no such flush (see
    /// ``flushUnsupported``), as far as it can (`fsync(2)`): for the files a store writes whole
    /// (a new, compacted or repaired data file, a quarantine copy) and for cuts, so a store works
    /// there; only what promises durability fails (see ``sync(_:dataOnly:)``).
    @discardableResult
    func syncWhereSupported(_ fd: Int32, dataOnly: Bool = false) -> Result<Void, Errno> {
        switch sync(fd, dataOnly: dataOnly) {
        case .failure(let error) where Self.flushUnsupported.contains(error):
            if let error = fault(.syncToDrive, nil) { return .failure(error) }
            return retrying { fileSystem.syncToDrive(fd) }
        case let result: return result
        }
    }

    /// Takes (`exclusive: true`) or releases (`false`) the `flock(2)` lock on `fd`, waiting as needed.
    func lock(_ fd: Int32, exclusive: Bool) -> Result<Void, Errno> {
        lock(fd, exclusive ? .exclusive : .unlocked)
    }

    /// `flock(2)` on `fd`: takes `mode` (or releases, `.unlocked`), waiting for whoever holds
    /// a lock in the way, or with `waiting: false` failing with `EWOULDBLOCK` instead.
    func lock(_ fd: Int32, _ mode: FileLockMode, waiting: Bool = true) -> Result<Void, Errno> {
        if mode != .unlocked, let error = fault(.lock, nil) { return .failure(error) }
        return retrying { fileSystem.lock(fd, mode, waiting: waiting) }
    }

    /// The kind, size, identity and owner of an open file, from `fstat(2)`.
    func status(_ fd: Int32) -> Result<FileStatus, Errno> {
        if let error = fault(.stat, nil) { return .failure(error) }
        return retrying { fileSystem.status(fd) }
    }

    /// Sets the length of `fd` with `ftruncate(2)`.
    func truncate(_ fd: Int32, to length: Int) -> Result<Void, Errno> {
        if let error = fault(.truncate, nil) { return .failure(error) }
        return retrying { fileSystem.truncate(fd, to: length) }
    }

    /// Allocates disk space for `offset..<offset + length` (see ``FileSystem/allocate(_:offset:length:)``).
    func allocate(_ fd: Int32, offset: Int, length: Int) -> Result<Void, Errno> {
        if let error = fault(.allocate, nil) { return .failure(error) }
        return retrying { fileSystem.allocate(fd, offset: offset, length: length) }
    }

    /// Maps `length` bytes of `fd` shared and read-write with `mmap(2)`.
    func mapShared(_ fd: Int32, length: Int) -> Result<UnsafeMutableRawPointer, Errno> {
        if let error = fault(.map, nil) { return .failure(error) }
        return fileSystem.map(fd, length: length)
    }

    /// Maps `length` bytes of `fd` shared and read-only with `mmap(2)`.
    func mapReadOnly(_ fd: Int32, length: Int) -> Result<UnsafeRawPointer, Errno> {
        if let error = fault(.map, nil) { return .failure(error) }
        return fileSystem.mapReadOnly(fd, length: length)
    }

    /// Says that `length` bytes at `offset` of the mapping at `address` are about to be written
    /// (see ``FileSystem/willWriteMapping(_:offset:length:)``); no fault is injected, since a
    /// copy into memory cannot fail.
    func willWriteMapping(_ address: UnsafeMutableRawPointer, offset: Int, length: Int) -> Result<Void, Errno> {
        fileSystem.willWriteMapping(address, offset: offset, length: length)
    }

    /// Faults in pages of a shared mapping ahead of writes (see
    /// ``FileSystem/prefaultForWriting(_:offset:length:)``); `EINTR` is retried.
    func prefaultForWriting(_ address: UnsafeMutableRawPointer, offset: Int, length: Int) -> Result<Void, Errno> {
        if let error = fault(.prefault, nil) { return .failure(error) }
        return retrying { fileSystem.prefaultForWriting(address, offset: offset, length: length) }
    }

    /// The type of the file system holding `fd` (see ``FileSystem/fileSystemType(_:)``).
    func fileSystemType(_ fd: Int32) -> Result<Int64, Errno> {
        fileSystem.fileSystemType(fd)
    }

    /// Unmaps what ``mapShared(_:length:)`` mapped (`munmap(2)`).
    func unmap(_ address: UnsafeMutableRawPointer, length: Int) {
        fileSystem.unmap(address, length: length)
    }

    /// Makes the memory at `address` a robust, process-shared mutex (see
    /// ``FileSystem/initializeSharedMutex(at:)``).
    func initializeSharedMutex(at address: UnsafeMutableRawPointer) -> Result<Void, Errno> {
        fileSystem.initializeSharedMutex(at: address)
    }

    /// Takes the shared mutex at `address` (`pthread_mutex_lock`), waiting as needed; faults
    /// are injected as for ``lock(_:exclusive:)``.
    func lockSharedMutex(at address: UnsafeMutableRawPointer) -> Result<MutexAcquisition, Errno> {
        if let error = fault(.lock, nil) { return .failure(error) }
        return fileSystem.lockSharedMutex(at: address)
    }

    /// `pthread_mutex_consistent` on the mutex at `address`, after `.ownerDied`.
    func markSharedMutexConsistent(at address: UnsafeMutableRawPointer) -> Result<Void, Errno> {
        fileSystem.markSharedMutexConsistent(at: address)
    }

    /// Releases the shared mutex at `address` (`pthread_mutex_unlock`).
    func unlockSharedMutex(at address: UnsafeMutableRawPointer) {
        fileSystem.unlockSharedMutex(at: address)
    }

    // MARK: Helpers

    private func fault(_ call: Call, _ path: String?) -> Errno? {
        switch injected(call, path) {
        case .fail(let error): error
        case .shortWrite(_, let error): error ?? .ioError
        case .none: nil
        }
    }

    /// The fault to inject into this call at `path`, if any.
    private func injected(_ call: Call, _ path: String?) -> Fault? {
        injectFault?(call, path)
    }

    /// Runs `body` until it stops failing with `EINTR`.
    private func retrying<T>(_ body: () -> Result<T, Errno>) -> Result<T, Errno> {
        while true {
            let result = body()
            if case .failure(.interrupted) = result { continue }
            return result
        }
    }
}
