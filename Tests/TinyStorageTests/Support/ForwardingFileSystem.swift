import Foundation

@testable import TinyStorage

/// A ``FileSystem`` test double that passes every call to `base`, unless it implements the call
/// itself: a double states only what it changes or records.
protocol ForwardingFileSystem: FileSystem {
    var base: any FileSystem { get }
}

extension ForwardingFileSystem {
    func openDirectory(atPath path: String) -> Result<Int32, Errno> { base.openDirectory(atPath: path) }
    func makeDirectory(atPath path: String, mode: mode_t) -> Result<Void, Errno> {
        base.makeDirectory(atPath: path, mode: mode)
    }
    func open(in directory: Int32, _ name: String, flags: Int32, mode: mode_t) -> Result<Int32, Errno> {
        base.open(in: directory, name, flags: flags, mode: mode)
    }
    func makeDirectory(in directory: Int32, _ name: String, path: String, mode: mode_t) -> Result<Void, Errno> {
        base.makeDirectory(in: directory, name, path: path, mode: mode)
    }
    func protectionClass(ofItemAt path: String) -> Result<ProtectionClass, Errno> {
        base.protectionClass(ofItemAt: path)
    }
    func removeDataProtection(ofItemAt path: String) -> Result<Void, Errno> {
        base.removeDataProtection(ofItemAt: path)
    }
    func status(in directory: Int32, _ name: String) -> Result<FileStatus, Errno> { base.status(in: directory, name) }
    func status(_ fd: Int32) -> Result<FileStatus, Errno> { base.status(fd) }
    func close(_ fd: Int32) -> Result<Void, Errno> { base.close(fd) }
    func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Result<Int, Errno> {
        base.read(fd, into: buffer, at: offset)
    }
    func write(_ fd: Int32, from bytes: UnsafeRawBufferPointer, at offset: Int) -> Result<Int, Errno> {
        base.write(fd, from: bytes, at: offset)
    }
    func sync(_ fd: Int32, dataOnly: Bool) -> Result<Void, Errno> { base.sync(fd, dataOnly: dataOnly) }
    func syncToDrive(_ fd: Int32) -> Result<Void, Errno> { base.syncToDrive(fd) }
    func truncate(_ fd: Int32, to length: Int) -> Result<Void, Errno> { base.truncate(fd, to: length) }
    func allocate(_ fd: Int32, offset: Int, length: Int) -> Result<Void, Errno> {
        base.allocate(fd, offset: offset, length: length)
    }
    func rename(in directory: Int32, _ source: String, to destination: String) -> Result<Void, Errno> {
        base.rename(in: directory, source, to: destination)
    }
    func renameWithoutReplacing(in directory: Int32, _ source: String, to destination: String) -> Result<Void, Errno> {
        base.renameWithoutReplacing(in: directory, source, to: destination)
    }
    func unlink(in directory: Int32, _ name: String) -> Result<Void, Errno> { base.unlink(in: directory, name) }
    func entries(of directory: Int32) -> Result<[String], Errno> { base.entries(of: directory) }
    func lock(_ fd: Int32, _ mode: FileLockMode, waiting: Bool) -> Result<Void, Errno> {
        base.lock(fd, mode, waiting: waiting)
    }
    func map(_ fd: Int32, length: Int) -> Result<UnsafeMutableRawPointer, Errno> { base.map(fd, length: length) }
    func mapReadOnly(_ fd: Int32, length: Int) -> Result<UnsafeRawPointer, Errno> {
        base.mapReadOnly(fd, length: length)
    }
    func unmap(_ address: UnsafeMutableRawPointer, length: Int) { base.unmap(address, length: length) }
    func prefaultForWriting(_ address: UnsafeMutableRawPointer, offset: Int, length: Int) -> Result<Void, Errno> {
        base.prefaultForWriting(address, offset: offset, length: length)
    }
    func willWriteMapping(_ address: UnsafeMutableRawPointer, offset: Int, length: Int) -> Result<Void, Errno> {
        base.willWriteMapping(address, offset: offset, length: length)
    }
    func fileSystemType(_ fd: Int32) -> Result<Int64, Errno> { base.fileSystemType(fd) }
    func initializeSharedMutex(at address: UnsafeMutableRawPointer) -> Result<Void, Errno> {
        base.initializeSharedMutex(at: address)
    }
    func lockSharedMutex(at address: UnsafeMutableRawPointer) -> Result<MutexAcquisition, Errno> {
        base.lockSharedMutex(at: address)
    }
    func markSharedMutexConsistent(at address: UnsafeMutableRawPointer) -> Result<Void, Errno> {
        base.markSharedMutexConsistent(at: address)
    }
    func unlockSharedMutex(at address: UnsafeMutableRawPointer) { base.unlockSharedMutex(at: address) }
    var effectiveUserID: UInt32 { base.effectiveUserID }
    var bootIdentity: BootIdentity { base.bootIdentity }
}

/// The real file system, recording the identity (device and inode) of every file whose bytes
/// were read (`pread`) or mapped: what "nothing outside the store's folder is read" is checked
/// against.
final class ReadRecordingFileSystem: ForwardingFileSystem, Sendable {
    struct Identity: Hashable, CustomStringConvertible {
        let device: UInt64
        let inode: UInt64

        var description: String { "\(device):\(inode)" }
    }

    let base: any FileSystem = SystemFileSystem()
    private let recorded = Locked<Set<Identity>>([])

    var filesRead: Set<Identity> { recorded.withLock { $0 } }

    private func record(_ fd: Int32) {
        guard case .success(let status) = base.status(fd) else { return }
        recorded.withLock { _ = $0.insert(Identity(device: status.device, inode: status.inode)) }
    }

    func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Result<Int, Errno> {
        record(fd)
        return base.read(fd, into: buffer, at: offset)
    }

    func map(_ fd: Int32, length: Int) -> Result<UnsafeMutableRawPointer, Errno> {
        record(fd)
        return base.map(fd, length: length)
    }

    func mapReadOnly(_ fd: Int32, length: Int) -> Result<UnsafeRawPointer, Errno> {
        record(fd)
        return base.mapReadOnly(fd, length: length)
    }

    /// The identities of every file below `directory`, links not followed.
    static func identities(below directory: URL) -> Set<Identity> {
        Set(
            allPaths(below: directory).compactMap { relative in
                var info = stat()
                guard lstat(directory.appendingPathComponent(relative).path, &info) == 0 else { return nil }
                let status = FileStatus(info)
                return Identity(device: status.device, inode: status.inode)
            })
    }
}
