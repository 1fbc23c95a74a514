import CTinyStorageShims

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The real system calls: one shim per call, nothing else (see ``FileSystem``), with the
/// platform's decisions (``Platform``) where they differ.
struct SystemFileSystem: FileSystem {
    let platform: Platform
    #if os(Linux)
    /// Apple's data protection where ``Platform/removesDataProtection`` (Apple semantics on Linux).
    let simulatedProtection: SimulatedDataProtection
    #endif

    init(platform: Platform = .current) {
        self.platform = platform
        #if os(Linux)
        simulatedProtection = SimulatedDataProtection()
        #endif
    }

    #if os(Linux)
    /// With Apple semantics, the stand-in for data protection obeys `simulatedProtection`'s device.
    init(platform: Platform = .current, simulatedProtection: SimulatedDataProtection) {
        self.platform = platform
        self.simulatedProtection = simulatedProtection
    }
    #endif

    func openDirectory(atPath path: String) -> Result<Int32, Errno> {
        // NB: for search only (O_PATH, O_SEARCH), as path-based calls need: a store may sit in a
        // folder its user can pass through but not list, as an iOS app's container sits below
        // folders its sandbox lets it pass through but not read.
        check(systemOpen(path, platform.directorySearchFlags | O_CLOEXEC, 0))
    }

    func makeDirectory(atPath path: String, mode: mode_t) -> Result<Void, Errno> {
        let made = check(mkdir(path, mode)).map { _ in }
        #if os(Linux)
        if platform.removesDataProtection, case .success = made {
            simulatedProtection.didMakeDirectory(atPath: path, inDirectoryAt: FileIO.parentPath(of: path))
        }
        #endif
        return made
    }

    func open(in directory: Int32, _ name: String, flags: Int32, mode: mode_t) -> Result<Int32, Errno> {
        #if os(Linux)
        if platform.removesDataProtection {
            return simulatedProtection.open(in: directory, name, flags: flags) {
                check(openat(directory, name, flags | O_CLOEXEC, mode))
            }
        }
        #endif
        return check(openat(directory, name, flags | O_CLOEXEC, mode))
    }

    func makeDirectory(in directory: Int32, _ name: String, path: String, mode: mode_t) -> Result<Void, Errno> {
        let make = { check(mkdirat(directory, name, mode)).map { _ in } }
        guard platform.removesDataProtection else { return make() }
        #if os(Linux)
        return simulatedProtection.makeUnprotectedDirectory(atPath: path, in: directory, make)
        #else
        return DataProtection.createUnprotectedDirectory(atPath: path, mode: Int(mode)) ?? make()
        #endif
    }

    func protectionClass(ofItemAt path: String) -> Result<ProtectionClass, Errno> {
        guard platform.removesDataProtection else { return .success(.none) }
        #if os(Linux)
        return simulatedProtection.protectionClass(ofItemAt: path)
        #else
        return DataProtection.protectionClass(ofItemAt: path)
        #endif
    }

    func removeDataProtection(ofItemAt path: String) -> Result<Void, Errno> {
        guard platform.removesDataProtection else { return .success(()) }
        #if os(Linux)
        return simulatedProtection.setProtectionClass(.none, ofItemAt: path)
        #else
        return DataProtection.removeProtection(ofItemAt: path)
        #endif
    }

    func status(in directory: Int32, _ name: String) -> Result<FileStatus, Errno> {
        var info = stat()
        return check(fstatat(directory, name, &info, AT_SYMLINK_NOFOLLOW)).map { _ in FileStatus(info) }
    }

    func status(_ fd: Int32) -> Result<FileStatus, Errno> {
        var info = stat()
        return check(fstat(fd, &info)).map { _ in FileStatus(info) }
    }

    func close(_ fd: Int32) -> Result<Void, Errno> {
        check(systemClose(fd)).map { _ in }
    }

    func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Result<Int, Errno> {
        guard let base = buffer.baseAddress else { return .success(0) }
        return check(pread(fd, base, buffer.count, off_t(offset)))
    }

    func write(_ fd: Int32, from bytes: UnsafeRawBufferPointer, at offset: Int) -> Result<Int, Errno> {
        guard let base = bytes.baseAddress else { return .success(0) }
        return check(pwrite(fd, base, bytes.count, off_t(offset)))
    }

    func sync(_ fd: Int32, dataOnly: Bool) -> Result<Void, Errno> {
        #if canImport(Darwin)
        // NB: `fsync(2)` on Apple platforms leaves data in the drive's cache, so it is no
        // substitute: a file system that rejects F_FULLFSYNC makes the flush fail, and a durable
        // commit with it (files written whole fall back, see `FileIO.syncWhereSupported`).
        // See: man 2 fcntl (F_FULLFSYNC).
        return check(fcntl(fd, F_FULLFSYNC)).map { _ in }
        #else
        return check(dataOnly ? fdatasync(fd) : fsync(fd)).map { _ in }
        #endif
    }

    func syncToDrive(_ fd: Int32) -> Result<Void, Errno> {
        check(fsync(fd)).map { _ in }
    }

    func truncate(_ fd: Int32, to length: Int) -> Result<Void, Errno> {
        check(ftruncate(fd, off_t(length))).map { _ in }
    }

    func allocate(_ fd: Int32, offset: Int, length: Int) -> Result<Void, Errno> {
        #if canImport(Darwin)
        // See: man 2 fcntl (F_PREALLOCATE). With F_PEOFPOSMODE the request is a length beyond
        // the file's physical end, which is at or past its logical size: asking for the missing
        // bytes beyond the logical size is therefore enough. ftruncate(2) then sets the size and
        // keeps existing bytes.
        var info = stat()
        if fstat(fd, &info) == -1 { return .failure(.current) }
        let missing = offset + length - Int(clamping: info.st_size)
        if missing <= 0 { return .success(()) }
        var request = fstore_t(
            fst_flags: UInt32(F_ALLOCATEALL), fst_posmode: F_PEOFPOSMODE, fst_offset: 0,
            fst_length: off_t(missing), fst_bytesalloc: 0)
        if fcntl(fd, F_PREALLOCATE, &request) == -1 { return .failure(.current) }
        return check(ftruncate(fd, off_t(offset + length))).map { _ in }
        #else
        // NB: posix_fallocate returns the error number instead of setting errno.
        let result = posix_fallocate(fd, off_t(offset), off_t(length))
        return result == 0 ? .success(()) : .failure(Errno(result))
        #endif
    }

    func rename(in directory: Int32, _ source: String, to destination: String) -> Result<Void, Errno> {
        check(renameat(directory, source, directory, destination)).map { _ in }
    }

    func renameWithoutReplacing(in directory: Int32, _ source: String, to destination: String) -> Result<Void, Errno> {
        check(ts_rename_noreplace(directory, source, destination)).map { _ in }
    }

    func unlink(in directory: Int32, _ name: String) -> Result<Void, Errno> {
        check(unlinkat(directory, name, 0)).map { _ in }
    }

    func entries(of directory: Int32) -> Result<[String], Errno> {
        // NB: fdopendir takes ownership of its descriptor, so it gets a duplicate.
        let duplicate = dup(directory)
        guard duplicate >= 0 else { return .failure(.current) }
        guard let stream = fdopendir(duplicate) else {
            let error = Errno.current
            _ = systemClose(duplicate)
            return .failure(error)
        }
        defer { closedir(stream) }
        rewinddir(stream)
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return .success(names)
    }

    func lock(_ fd: Int32, _ mode: FileLockMode, waiting: Bool) -> Result<Void, Errno> {
        let operation: Int32 =
            switch mode {
            case .shared: LOCK_SH
            case .exclusive: LOCK_EX
            case .unlocked: LOCK_UN
            }
        return check(flock(fd, waiting ? operation : operation | LOCK_NB)).map { _ in }
    }

    func willWriteMapping(_ address: UnsafeMutableRawPointer, offset: Int, length: Int) -> Result<Void, Errno> {
        .success(())
    }

    func prefaultForWriting(_ address: UnsafeMutableRawPointer, offset: Int, length: Int) -> Result<Void, Errno> {
        check(ts_prefault_for_writing(address + offset, length)).map { _ in }
    }

    func fileSystemType(_ fd: Int32) -> Result<Int64, Errno> {
        let type = ts_file_system_type(fd)
        return type == -1 ? .failure(.current) : .success(type)
    }

    func map(_ fd: Int32, length: Int) -> Result<UnsafeMutableRawPointer, Errno> {
        let address = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        guard let address, address != MAP_FAILED else { return .failure(.current) }
        return .success(address)
    }

    func mapReadOnly(_ fd: Int32, length: Int) -> Result<UnsafeRawPointer, Errno> {
        let address = mmap(nil, length, PROT_READ, MAP_SHARED, fd, 0)
        guard let address, address != MAP_FAILED else { return .failure(.current) }
        return .success(UnsafeRawPointer(address))
    }

    func unmap(_ address: UnsafeMutableRawPointer, length: Int) {
        munmap(address, length)
    }

    // NB: the pthread calls return their error number instead of setting errno.

    func initializeSharedMutex(at address: UnsafeMutableRawPointer) -> Result<Void, Errno> {
        let result = ts_shared_mutex_init(address)
        return result == 0 ? .success(()) : .failure(Errno(result))
    }

    func lockSharedMutex(at address: UnsafeMutableRawPointer) -> Result<MutexAcquisition, Errno> {
        switch ts_shared_mutex_lock(address) {
        case 0: .success(.acquired)
        case ts_errno_owner_dead(): .success(.ownerDied)
        case let error: .failure(Errno(error))
        }
    }

    func markSharedMutexConsistent(at address: UnsafeMutableRawPointer) -> Result<Void, Errno> {
        let result = ts_shared_mutex_consistent(address)
        return result == 0 ? .success(()) : .failure(Errno(result))
    }

    func unlockSharedMutex(at address: UnsafeMutableRawPointer) {
        _ = ts_shared_mutex_unlock(address)
    }

    var effectiveUserID: UInt32 { UInt32(geteuid()) }

    var bootIdentity: BootIdentity { Self.currentBoot }

    /// Read once per process: it cannot change while the process runs. When it cannot be read,
    /// a random identity of this process: every page then looks like another boot's, so nothing
    /// recorded before a reboot is ever trusted (the cost: a full check of the file at open).
    private static let currentBoot: BootIdentity = {
        let unknownBoot = BootIdentity(high: .random(in: .min ... .max), low: .random(in: .min ... .max))
        var buffer = [UInt8](repeating: 0, count: 64)
        #if canImport(Darwin)
        // NB: XNU's boot session UUID, made at boot, by name only (no KERN_ constant): a string
        // of 36 characters and a NUL. Not the boot time (`KERN_BOOTTIME`), which moves when the
        // clock is set: processes started before and after disagreed about every page.
        var size = buffer.count
        guard sysctlbyname("kern.bootsessionuuid", &buffer, &size, nil, 0) == 0 else { return unknownBoot }
        return BootIdentity(uuidText: buffer.prefix(size)) ?? unknownBoot
        #else
        // A random UUID the kernel makes at boot, as text and a line feed.
        let fd = systemOpen("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC, 0)
        guard fd >= 0 else { return unknownBoot }
        defer { _ = systemClose(fd) }
        let count = buffer.withUnsafeMutableBytes { systemRead(fd, $0.baseAddress, $0.count) }
        return BootIdentity(uuidText: buffer.prefix(max(count, 0))) ?? unknownBoot
        #endif
    }()

    /// A negative result becomes the current `errno`.
    ///
    /// NB: with Apple semantics on Linux, a denied access answers `EPERM`, as the iOS sandbox
    /// does, so that every caller handles it (see ``Platform/deniesWithNotPermitted``).
    private func check<T: BinaryInteger>(_ result: T) -> Result<T, Errno> {
        guard result < 0 else { return .success(result) }
        #if !canImport(Darwin)
        if platform.deniesWithNotPermitted, Errno.current == .accessDenied { return .failure(.notPermitted) }
        #endif
        return .failure(.current)
    }
}

// NB: these wrappers exist because `FileSystem`'s requirements shadow the C names `open` and
// `close` inside conforming types.
private func systemOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    #if canImport(Darwin)
    return Darwin.open(path, flags, mode)
    #elseif canImport(Musl)
    return Musl.open(path, flags, mode)
    #else
    return Glibc.open(path, flags, mode)
    #endif
}

private func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    #if canImport(Darwin)
    return Darwin.read(fd, buffer, count)
    #elseif canImport(Musl)
    return Musl.read(fd, buffer, count)
    #else
    return Glibc.read(fd, buffer, count)
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
