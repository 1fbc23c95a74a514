import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The system calls the engine makes, each behind one thin shim.
///
/// Every shim retries `EINTR`, loops over short reads and writes, and returns `Result<_, Errno>`
/// instead of setting a global. Tests build a `FileIO` with a ``FaultInjector`` to make any call
/// fail on demand (`EIO` on `fsync`, `ENOSPC` in the middle of an append, a short write…); the
/// production value has none, which costs one `nil` check per call.
struct FileIO: Sendable {
    /// The calls a ``FaultInjector`` can intercept.
    enum Call: String, Sendable, CaseIterable {
        case open, close, read, write, sync, lock, stat, rename, makeDirectory, truncate, unlink, map
    }

    /// What an injected fault does to an intercepted call.
    enum Fault: Sendable, Equatable {
        /// The call fails with this error number and does nothing.
        case fail(Errno)
        /// A write transfers at most this many bytes, then fails with `errno` (models `ENOSPC`
        /// after a partial write, or a crash after a partial write when `errno` is `nil`).
        case shortWrite(bytes: Int, then: Errno?)
        /// This attempt fails with `EINTR`: the shim retries, asking the injector again (an
        /// injector that always answers `.interrupt` hangs the call, as a real one would).
        case interrupt
    }

    /// Decides, for each intercepted call and path, whether to inject a fault.
    typealias FaultInjector = @Sendable (_ call: Call, _ path: String?) -> Fault?

    var injectFault: FaultInjector?

    static let system = FileIO(injectFault: nil)

    // MARK: Files

    /// Opens `path` with `open(2)`; always adds `O_CLOEXEC`.
    func open(_ path: String, flags: Int32, mode: mode_t = 0o600) -> Result<Int32, Errno> {
        if let error = fault(.open, path) { return .failure(error) }
        return retrying { systemOpen(path, flags | O_CLOEXEC, mode) }
    }

    /// Closes `fd` with `close(2)`. `EINTR` is not retried: on Linux the descriptor is gone anyway.
    @discardableResult
    func close(_ fd: Int32) -> Result<Void, Errno> {
        if let error = fault(.close, nil) { return .failure(error) }
        return systemClose(fd) == 0 ? .success(()) : .failure(.current)
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
        var buffer = Data(count: count)
        let result = buffer.withUnsafeMutableBytes { readFully(fd, into: $0, at: offset) }
        return result.map { done in
            if done < count { buffer.count = done }
            return buffer
        }
    }

    /// `pread(2)` into `buffer` until it is full or the file ends; returns the bytes read.
    private func readFully(
        _ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int
    ) -> Result<Int, Errno> {
        guard let base = buffer.baseAddress else { return .success(0) }
        var done = 0
        while done < buffer.count {
            let n = pread(fd, base + done, buffer.count - done, off_t(offset + done))
            if n > 0 {
                done += n
            } else if n == 0 {
                break
            } else if errno != EINTR {
                return .failure(.current)
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
            case .interrupt: break  // not returned by `injected`
            }
        }
        var done = 0
        guard let base = bytes.baseAddress else { return failure.map { .failure($0) } ?? .success(()) }
        while done < limit {
            let n = pwrite(fd, base + done, limit - done, off_t(offset + done))
            if n >= 0 {
                done += n
            } else if errno != EINTR {
                return .failure(.current)
            }
        }
        if let failure { return .failure(failure) }
        return .success(())
    }

    /// Flushes `fd` to stable storage.
    ///
    /// Linux: `fdatasync(2)` when `dataOnly`, else `fsync(2)`. Apple platforms: `fcntl(F_FULLFSYNC)`,
    /// because plain `fsync(2)` there does not flush the drive's cache; falls back to `fsync(2)` on
    /// file systems that reject `F_FULLFSYNC`.
    func sync(_ fd: Int32, dataOnly: Bool = false) -> Result<Void, Errno> {
        if let error = fault(.sync, nil) { return .failure(error) }
        #if canImport(Darwin)
        if fcntl(fd, F_FULLFSYNC) == 0 { return .success(()) }
        return retrying { fsync(fd) }.map { _ in }
        #else
        return retrying { dataOnly ? fdatasync(fd) : fsync(fd) }.map { _ in }
        #endif
    }

    /// Opens the directory at `path` and syncs it, so that a rename or file creation inside it is
    /// durable (`open(2)` + `fsync(2)`).
    func syncDirectory(_ path: String) -> Result<Void, Errno> {
        open(path, flags: O_RDONLY | O_DIRECTORY).flatMap { fd in
            defer { close(fd) }
            return sync(fd)
        }
    }

    /// Takes (`exclusive`) or releases (`nil`) the `flock(2)` lock on `fd`, waiting as needed.
    func lock(_ fd: Int32, exclusive: Bool?) -> Result<Void, Errno> {
        if exclusive != nil, let error = fault(.lock, nil) { return .failure(error) }
        let operation: Int32 =
            switch exclusive {
            case .some(true): LOCK_EX
            case .some(false): LOCK_SH
            case .none: LOCK_UN
            }
        return retrying { flock(fd, operation) }.map { _ in }
    }

    /// The size and identity of an open file, from `fstat(2)`.
    func status(_ fd: Int32) -> Result<FileStatus, Errno> {
        if let error = fault(.stat, nil) { return .failure(error) }
        var info = stat()
        return retrying { fstat(fd, &info) }.map { _ in FileStatus(info) }
    }

    /// The size and identity of the file at `path`, from `stat(2)`.
    func status(atPath path: String) -> Result<FileStatus, Errno> {
        if let error = fault(.stat, path) { return .failure(error) }
        var info = stat()
        return retrying { stat(path, &info) }.map { _ in FileStatus(info) }
    }

    /// Atomically replaces `destination` with `source` (`rename(2)`).
    func rename(_ source: String, to destination: String) -> Result<Void, Errno> {
        if let error = fault(.rename, destination) { return .failure(error) }
        return retrying { systemRename(source, destination) }.map { _ in }
    }

    /// Creates a directory with `mkdir(2)`; an existing directory is not an error.
    func makeDirectory(_ path: String, mode: mode_t = 0o700) -> Result<Void, Errno> {
        if let error = fault(.makeDirectory, path) { return .failure(error) }
        if mkdir(path, mode) == 0 { return .success(()) }
        let error = Errno.current
        if error == .exists {
            var info = stat()
            if stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR { return .success(()) }
            return .failure(.notDirectory)
        }
        return .failure(error)
    }

    /// Sets the length of `fd` with `ftruncate(2)`.
    func truncate(_ fd: Int32, to length: Int) -> Result<Void, Errno> {
        if let error = fault(.truncate, nil) { return .failure(error) }
        return retrying { ftruncate(fd, off_t(length)) }.map { _ in }
    }

    /// Removes the file at `path` with `unlink(2)`; a missing file is not an error.
    func unlink(_ path: String) -> Result<Void, Errno> {
        if let error = fault(.unlink, path) { return .failure(error) }
        if systemUnlink(path) == 0 || errno == ENOENT { return .success(()) }
        return .failure(.current)
    }

    /// Maps `length` bytes of `fd` shared and read-write with `mmap(2)`.
    func mapShared(_ fd: Int32, length: Int) -> Result<UnsafeMutableRawPointer, Errno> {
        if let error = fault(.map, nil) { return .failure(error) }
        let address = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        guard let address, address != MAP_FAILED else { return .failure(.current) }
        return .success(address)
    }

    // MARK: Helpers

    private func fault(_ call: Call, _ path: String?) -> Errno? {
        switch injected(call, path) {
        case .fail(let error): error
        case .shortWrite(_, let error): error ?? .ioError
        case .interrupt, .none: nil
        }
    }

    /// The fault to inject into this attempt at `call`, never `.interrupt`: an injected interrupt
    /// stands for a call that returned `EINTR`, so it is retried, and the injector asked again.
    /// After a few interrupts in a row the real call runs, so an injector that always interrupts
    /// exercises the retry without hanging the test.
    private func injected(_ call: Call, _ path: String?) -> Fault? {
        guard let injectFault else { return nil }
        for _ in 0..<Self.injectedInterruptLimit {
            guard let fault = injectFault(call, path) else { return nil }
            if fault != .interrupt { return fault }
        }
        return nil
    }

    static let injectedInterruptLimit = 4

    /// Runs `body` until it stops failing with `EINTR`; a negative result becomes `errno`.
    private func retrying<T: BinaryInteger>(_ body: () -> T) -> Result<T, Errno> {
        while true {
            let result = body()
            if result >= 0 { return .success(result) }
            if errno != EINTR { return .failure(.current) }
        }
    }
}

/// What the engine needs from `stat(2)`.
struct FileStatus: Sendable, Equatable {
    var size: Int
    var device: UInt64
    var inode: UInt64
    var isRegularFile: Bool

    init(size: Int, device: UInt64, inode: UInt64, isRegularFile: Bool) {
        self.size = size
        self.device = device
        self.inode = inode
        self.isRegularFile = isRegularFile
    }

    init(_ info: stat) {
        self.init(
            size: Int(info.st_size), device: UInt64(truncatingIfNeeded: info.st_dev),
            inode: UInt64(truncatingIfNeeded: info.st_ino),
            isRegularFile: (info.st_mode & S_IFMT) == S_IFREG)
    }
}

// NB: these wrappers exist because the shims above shadow the C names `open`, `close`,
// `rename` and `unlink` inside `FileIO`.
private func systemOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    #if canImport(Darwin)
    return Darwin.open(path, flags, mode)
    #elseif canImport(Musl)
    return Musl.open(path, flags, mode)
    #else
    return Glibc.open(path, flags, mode)
    #endif
}

private func systemClose(_ fd: Int32) -> Int32 {
    #if canImport(Darwin)
    return Darwin.close(fd)
    #elseif canImport(Musl)
    return Musl.close(fd)
    #else
    return Glibc.close(fd)
    #endif
}

private func systemRename(_ source: String, _ destination: String) -> Int32 {
    #if canImport(Darwin)
    return Darwin.rename(source, destination)
    #elseif canImport(Musl)
    return Musl.rename(source, destination)
    #else
    return Glibc.rename(source, destination)
    #endif
}

private func systemUnlink(_ path: String) -> Int32 {
    #if canImport(Darwin)
    return Darwin.unlink(path)
    #elseif canImport(Musl)
    return Musl.unlink(path)
    #else
    return Glibc.unlink(path)
    #endif
}
