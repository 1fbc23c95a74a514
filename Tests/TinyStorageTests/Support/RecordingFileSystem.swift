import Foundation

@testable import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The real file system, with a record of the calls that create things, for tests of written
/// contracts: which directory every file is created in, which directories are created, which
/// items have their data protection looked at or removed, and which store locks the calling
/// thread held meanwhile.
final class RecordingFileSystem: ForwardingFileSystem, @unchecked Sendable {
    // @unchecked: `events` is only touched while holding `lock`; `base` is immutable.
    enum Event: Equatable, CustomStringConvertible {
        /// A file created with `O_CREAT` in the directory at this path.
        case createdFile(directory: String, name: String)
        case createdDirectory(path: String)
        /// The item's protection class asked, to remove it when it has one.
        case checkedDataProtection(path: String)
        case removedDataProtection(path: String)
        /// A flush, and whether the cross-process lock was held.
        case synced(holdingFileLock: Bool)
        /// A write of this many bytes, and whether the cross-process lock was held.
        case wrote(count: Int, holdingFileLock: Bool)
        /// Space allocated (`posix_fallocate`), how many bytes, and whether the lock was held.
        case allocated(count: Int, holdingFileLock: Bool)
        /// A write through a mapping (no system call), and whether the lock was held. Also
        /// recorded as a `wrote` event.
        case wroteThroughMapping(count: Int, holdingFileLock: Bool)
        case renamed(to: String, holdingFileLock: Bool)
        /// A file mapped (`mmap`), this many bytes.
        case mapped(length: Int)
        /// Pages of a mapping faulted in ahead of writes, where, how many bytes, and whether the
        /// lock was held.
        case prefaulted(offset: Int, count: Int, holdingFileLock: Bool)
        /// The file system's type asked (`fstatfs`).
        case askedFileSystemType
        /// A file cut short (`ftruncate`), and whether the cross-process lock was held.
        case truncated(holdingFileLock: Bool)
        /// `flock(2)` on the lock file (the commit lock on Apple platforms), and whether the
        /// calling thread held the engine's lock.
        case lockedLockFile(mode: FileLockMode, holdingEngineLock: Bool)

        var description: String {
            switch self {
            case .createdFile(let directory, let name): "created file \(directory)/\(name)"
            case .createdDirectory(let path): "created directory \(path)"
            case .checkedDataProtection(let path): "checked data protection of \(path)"
            case .removedDataProtection(let path): "removed data protection of \(path)"
            case .synced(let locked): "synced\(locked ? " under the file lock" : "")"
            case .wrote(let count, let locked): "wrote \(count)\(locked ? " under the file lock" : "")"
            case .allocated(let count, let locked): "allocated \(count)\(locked ? " under the file lock" : "")"
            case .wroteThroughMapping(let count, let locked):
                "wrote \(count) through a mapping\(locked ? " under the file lock" : "")"
            case .renamed(let to, let locked): "renamed to \(to)\(locked ? " under the file lock" : "")"
            case .mapped(let length): "mapped \(length)"
            case .prefaulted(let offset, let count, let locked):
                "prefaulted \(count) at \(offset)\(locked ? " under the file lock" : "")"
            case .askedFileSystemType: "asked the file system's type"
            case .truncated(let locked): "truncated\(locked ? " under the file lock" : "")"
            case .lockedLockFile(let mode, let engine):
                "flock \(mode) on store.lock\(engine ? "" : " without the engine's lock")"
            }
        }
    }

    let base: any FileSystem = SystemFileSystem()
    /// What `fstatfs` answers, when not the real file system's type.
    private let reportedFileSystemType: Int64?
    private let lock = NSLock()
    private var recorded: [Event] = []
    /// Directory paths by descriptor, so a creation names its directory.
    private var directories: [Int32: String] = [:]
    /// The descriptors of `store.lock` files.
    private var lockFiles: Set<Int32> = []

    /// - Parameter fileSystemType: What `fstatfs` answers for every file; `nil`, the truth.
    init(fileSystemType: Int64? = nil) {
        reportedFileSystemType = fileSystemType
    }

    var events: [Event] {
        lock.lock()
        defer { lock.unlock() }
        return recorded
    }

    private func record(_ event: Event) {
        lock.lock()
        recorded.append(event)
        lock.unlock()
    }

    private func path(of fd: Int32) -> String {
        lock.lock()
        defer { lock.unlock() }
        return directories[fd] ?? "<fd \(fd)>"
    }

    func openDirectory(atPath path: String) -> Result<Int32, Errno> {
        let result = base.openDirectory(atPath: path)
        if case .success(let fd) = result {
            lock.lock()
            directories[fd] = path
            lock.unlock()
        }
        return result
    }

    func makeDirectory(atPath path: String, mode: mode_t) -> Result<Void, Errno> {
        base.makeDirectory(atPath: path, mode: mode)
    }

    func open(in directory: Int32, _ name: String, flags: Int32, mode: mode_t) -> Result<Int32, Errno> {
        let result = base.open(in: directory, name, flags: flags, mode: mode)
        if case .success(let fd) = result {
            if flags & O_CREAT != 0 { record(.createdFile(directory: path(of: directory), name: name)) }
            if name == StoreLocation.lockFileName {
                lock.lock()
                lockFiles.insert(fd)
                lock.unlock()
            }
            if flags & O_DIRECTORY != 0 {
                let full = path(of: directory) + "/" + name
                lock.lock()
                directories[fd] = full
                lock.unlock()
            }
        }
        return result
    }

    func makeDirectory(in directory: Int32, _ name: String, path: String, mode: mode_t) -> Result<Void, Errno> {
        let result = base.makeDirectory(in: directory, name, path: path, mode: mode)
        if case .success = result { record(.createdDirectory(path: path)) }
        return result
    }

    func protectionClass(ofItemAt path: String) -> Result<ProtectionClass, Errno> {
        record(.checkedDataProtection(path: path))
        return base.protectionClass(ofItemAt: path)
    }

    func removeDataProtection(ofItemAt path: String) -> Result<Void, Errno> {
        record(.removedDataProtection(path: path))
        return base.removeDataProtection(ofItemAt: path)
    }

    func status(in directory: Int32, _ name: String) -> Result<FileStatus, Errno> { base.status(in: directory, name) }
    func status(_ fd: Int32) -> Result<FileStatus, Errno> { base.status(fd) }

    func close(_ fd: Int32) -> Result<Void, Errno> {
        lock.lock()
        directories[fd] = nil
        lockFiles.remove(fd)
        lock.unlock()
        return base.close(fd)
    }

    func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Result<Int, Errno> {
        base.read(fd, into: buffer, at: offset)
    }

    func write(_ fd: Int32, from bytes: UnsafeRawBufferPointer, at offset: Int) -> Result<Int, Errno> {
        record(.wrote(count: bytes.count, holdingFileLock: LockWitness.isHolding(.file)))
        return base.write(fd, from: bytes, at: offset)
    }

    func sync(_ fd: Int32, dataOnly: Bool) -> Result<Void, Errno> {
        record(.synced(holdingFileLock: LockWitness.isHolding(.file)))
        return base.sync(fd, dataOnly: dataOnly)
    }

    func truncate(_ fd: Int32, to length: Int) -> Result<Void, Errno> {
        record(.truncated(holdingFileLock: LockWitness.isHolding(.file)))
        return base.truncate(fd, to: length)
    }

    func allocate(_ fd: Int32, offset: Int, length: Int) -> Result<Void, Errno> {
        record(.allocated(count: length, holdingFileLock: LockWitness.isHolding(.file)))
        return base.allocate(fd, offset: offset, length: length)
    }

    func rename(in directory: Int32, _ source: String, to destination: String) -> Result<Void, Errno> {
        record(.renamed(to: destination, holdingFileLock: LockWitness.isHolding(.file)))
        return base.rename(in: directory, source, to: destination)
    }

    func renameWithoutReplacing(in directory: Int32, _ source: String, to destination: String) -> Result<Void, Errno> {
        record(.renamed(to: destination, holdingFileLock: LockWitness.isHolding(.file)))
        return base.renameWithoutReplacing(in: directory, source, to: destination)
    }

    func unlink(in directory: Int32, _ name: String) -> Result<Void, Errno> { base.unlink(in: directory, name) }
    func entries(of directory: Int32) -> Result<[String], Errno> { base.entries(of: directory) }
    func lock(_ fd: Int32, _ mode: FileLockMode, waiting: Bool) -> Result<Void, Errno> {
        lock.lock()
        let isLockFile = lockFiles.contains(fd)
        lock.unlock()
        if isLockFile { record(.lockedLockFile(mode: mode, holdingEngineLock: LockWitness.isHolding(.engine))) }
        return base.lock(fd, mode, waiting: waiting)
    }

    func map(_ fd: Int32, length: Int) -> Result<UnsafeMutableRawPointer, Errno> {
        record(.mapped(length: length))
        return base.map(fd, length: length)
    }

    func mapReadOnly(_ fd: Int32, length: Int) -> Result<UnsafeRawPointer, Errno> {
        record(.mapped(length: length))
        return base.mapReadOnly(fd, length: length)
    }
    func unmap(_ address: UnsafeMutableRawPointer, length: Int) { base.unmap(address, length: length) }

    func willWriteMapping(_ address: UnsafeMutableRawPointer, offset: Int, length: Int) -> Result<Void, Errno> {
        record(.wrote(count: length, holdingFileLock: LockWitness.isHolding(.file)))
        record(.wroteThroughMapping(count: length, holdingFileLock: LockWitness.isHolding(.file)))
        return base.willWriteMapping(address, offset: offset, length: length)
    }

    func prefaultForWriting(_ address: UnsafeMutableRawPointer, offset: Int, length: Int) -> Result<Void, Errno> {
        record(.prefaulted(offset: offset, count: length, holdingFileLock: LockWitness.isHolding(.file)))
        return base.prefaultForWriting(address, offset: offset, length: length)
    }

    func fileSystemType(_ fd: Int32) -> Result<Int64, Errno> {
        record(.askedFileSystemType)
        return reportedFileSystemType.map { .success($0) } ?? base.fileSystemType(fd)
    }

}
