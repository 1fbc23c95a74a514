import Foundation

@testable import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The real file system, except that a call a signal can interrupt answers `EINTR` at its first
/// attempt, as the system does when a signal arrives while it waits, and runs for real when the
/// same thread tries again. That `EINTR` comes from the backend, where a real one comes from, so
/// only `FileIO`'s own retry loop can turn it into a success: a shim that returned it as a
/// failure makes the call, and whatever the engine built on it, fail.
///
/// Calls with no retry loop in `FileIO` are never interrupted: `close(2)` (on Linux the
/// descriptor is gone after `EINTR`), `mmap`, `munmap`, `fstatfs`, directory listings, writes
/// into a mapping and the shared mutex (`pthread_mutex_lock` does not return `EINTR`).
final class InterruptingFileSystem: ForwardingFileSystem, Sendable {
    private struct Attempt: Hashable {
        let call: FileIO.Call
        let thread: UInt
    }

    private struct State {
        /// Calls whose last attempt on a thread was interrupted: the next one there runs.
        var awaitingRetry: Set<Attempt> = []
        var interruptions: [FileIO.Call: Int] = [:]
    }

    let base: any FileSystem
    private let state = Locked(State())

    init(_ base: any FileSystem = SystemFileSystem()) {
        self.base = base
    }

    /// How many times `call` answered `EINTR`.
    func interruptions(of call: FileIO.Call) -> Int { state.withLock { $0.interruptions[call] ?? 0 } }

    /// `EINTR` when this is the first attempt at `call` on this thread; otherwise `body()`.
    private func interruptingFirst<T>(_ call: FileIO.Call, _ body: () -> Result<T, Errno>) -> Result<T, Errno> {
        let attempt = Attempt(call: call, thread: Self.currentThread)
        let interrupt = state.withLock { state -> Bool in
            if state.awaitingRetry.remove(attempt) != nil { return false }
            state.awaitingRetry.insert(attempt)
            state.interruptions[call, default: 0] += 1
            return true
        }
        return interrupt ? .failure(.interrupted) : body()
    }

    private static var currentThread: UInt {
        #if canImport(Darwin)
        UInt(bitPattern: pthread_self())
        #else
        UInt(pthread_self())
        #endif
    }

    func openDirectory(atPath path: String) -> Result<Int32, Errno> {
        interruptingFirst(.open) { base.openDirectory(atPath: path) }
    }
    func makeDirectory(atPath path: String, mode: mode_t) -> Result<Void, Errno> {
        interruptingFirst(.makeDirectory) { base.makeDirectory(atPath: path, mode: mode) }
    }
    func open(in directory: Int32, _ name: String, flags: Int32, mode: mode_t) -> Result<Int32, Errno> {
        interruptingFirst(.open) { base.open(in: directory, name, flags: flags, mode: mode) }
    }
    func makeDirectory(in directory: Int32, _ name: String, path: String, mode: mode_t) -> Result<Void, Errno> {
        interruptingFirst(.makeDirectory) { base.makeDirectory(in: directory, name, path: path, mode: mode) }
    }
    func protectionClass(ofItemAt path: String) -> Result<ProtectionClass, Errno> {
        base.protectionClass(ofItemAt: path)
    }
    func removeDataProtection(ofItemAt path: String) -> Result<Void, Errno> {
        base.removeDataProtection(ofItemAt: path)
    }
    func status(in directory: Int32, _ name: String) -> Result<FileStatus, Errno> {
        interruptingFirst(.stat) { base.status(in: directory, name) }
    }
    func status(_ fd: Int32) -> Result<FileStatus, Errno> { interruptingFirst(.stat) { base.status(fd) } }
    func close(_ fd: Int32) -> Result<Void, Errno> { base.close(fd) }
    func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Result<Int, Errno> {
        interruptingFirst(.read) { base.read(fd, into: buffer, at: offset) }
    }
    func write(_ fd: Int32, from bytes: UnsafeRawBufferPointer, at offset: Int) -> Result<Int, Errno> {
        interruptingFirst(.write) { base.write(fd, from: bytes, at: offset) }
    }
    func sync(_ fd: Int32, dataOnly: Bool) -> Result<Void, Errno> {
        interruptingFirst(.sync) { base.sync(fd, dataOnly: dataOnly) }
    }
    func syncToDrive(_ fd: Int32) -> Result<Void, Errno> { interruptingFirst(.syncToDrive) { base.syncToDrive(fd) } }
    func truncate(_ fd: Int32, to length: Int) -> Result<Void, Errno> {
        interruptingFirst(.truncate) { base.truncate(fd, to: length) }
    }
    func allocate(_ fd: Int32, offset: Int, length: Int) -> Result<Void, Errno> {
        interruptingFirst(.allocate) { base.allocate(fd, offset: offset, length: length) }
    }
    func rename(in directory: Int32, _ source: String, to destination: String) -> Result<Void, Errno> {
        interruptingFirst(.rename) { base.rename(in: directory, source, to: destination) }
    }
    func renameWithoutReplacing(in directory: Int32, _ source: String, to destination: String) -> Result<Void, Errno> {
        interruptingFirst(.rename) { base.renameWithoutReplacing(in: directory, source, to: destination) }
    }
    func unlink(in directory: Int32, _ name: String) -> Result<Void, Errno> {
        interruptingFirst(.unlink) { base.unlink(in: directory, name) }
    }
    func entries(of directory: Int32) -> Result<[String], Errno> { base.entries(of: directory) }
    func lock(_ fd: Int32, _ mode: FileLockMode, waiting: Bool) -> Result<Void, Errno> {
        interruptingFirst(.lock) { base.lock(fd, mode, waiting: waiting) }
    }
    func map(_ fd: Int32, length: Int) -> Result<UnsafeMutableRawPointer, Errno> { base.map(fd, length: length) }
    func mapReadOnly(_ fd: Int32, length: Int) -> Result<UnsafeRawPointer, Errno> {
        base.mapReadOnly(fd, length: length)
    }
    func unmap(_ address: UnsafeMutableRawPointer, length: Int) { base.unmap(address, length: length) }
    func prefaultForWriting(_ address: UnsafeMutableRawPointer, offset: Int, length: Int) -> Result<Void, Errno> {
        interruptingFirst(.prefault) { base.prefaultForWriting(address, offset: offset, length: length) }
    }
    func willWriteMapping(_ address: UnsafeMutableRawPointer, offset: Int, length: Int) -> Result<Void, Errno> {
        base.willWriteMapping(address, offset: offset, length: length)
    }
    func fileSystemType(_ fd: Int32) -> Result<Int64, Errno> { base.fileSystemType(fd) }

}
