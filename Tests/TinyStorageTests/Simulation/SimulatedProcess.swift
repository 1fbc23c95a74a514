import Foundation

@testable import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What the processes of a simulation share besides the disk: the faults in force, and the
/// commit-lock mutexes in lock pages (simulated, so that a thread waiting for one lets the others
/// run, and a process killed holding one leaves it to the next owner as `EOWNERDEAD`).
final class SimulatedMachine: Sendable {
    struct Faults {
        /// Writes that would grow a file fail with `ENOSPC`.
        var diskFull = false
        /// The store's files cannot be opened (`EACCES`; `EPERM` with Apple semantics).
        var denied = false
        /// A full flush (`F_FULLFSYNC`) answers `ENOTTY`, as on exFAT; `fsync` works.
        var fullFlushUnsupported = false
    }

    /// A robust, process-shared, error-checking mutex.
    struct Mutex {
        /// The thread holding it (its scheduler ID) and its process.
        var owner: (thread: Int, process: Int)?
        /// Its owner died holding it: the next lock answers `EOWNERDEAD`.
        var ownerDied = false
        /// Taken after an owner died and not yet marked consistent.
        var inconsistent = false
        /// Unlocked while inconsistent: every later lock fails (`ENOTRECOVERABLE`).
        var notRecoverable = false
    }

    let faults = Locked(Faults())
    let mutexes = Locked<[Int: Mutex]>([:])
    let deniesWithNotPermitted: Bool

    init(deniesWithNotPermitted: Bool) {
        self.deniesWithNotPermitted = deniesWithNotPermitted
    }

    /// A process died: the mutexes its threads held are its successors' to repair.
    func processDied(_ process: Int) {
        mutexes.withLock { mutexes in
            for (address, mutex) in mutexes where mutex.owner?.process == process {
                mutexes[address]?.owner = nil
                mutexes[address]?.ownerDied = true
            }
        }
    }
}

/// One simulated process: the file system its store sees, which passes every call to the shared
/// simulated disk after a seam of the scheduler, and the threads it runs (its main thread, and one
/// for its background flushes).
///
/// Killed, it stops at the seam where it was: its descriptors are closed (so its `flock`s are
/// released), the mutexes it held are left to the next owner as `EOWNERDEAD`, and whatever it had
/// written through mappings stays, as shared memory does. Its threads never run again in the
/// schedule.
final class SimulatedProcess: FileSystem, @unchecked Sendable {
    // @unchecked: the mutable state is in `Locked` boxes; `disk`, `machine` and `scheduler` are
    // thread-safe.
    let id: Int
    let slot: Int
    let disk: SimulatedDisk
    let machine: SimulatedMachine
    let scheduler: SimulationScheduler
    private let descriptors = Locked<Set<Int32>>([])
    private let killed = Locked(false)
    private let background = Locked<[@Sendable () -> Void]>([])
    private let flusher = Locked<SimulationScheduler.SimulatedThread?>(nil)

    init(id: Int, slot: Int, disk: SimulatedDisk, machine: SimulatedMachine, scheduler: SimulationScheduler) {
        self.id = id
        self.slot = slot
        self.disk = disk
        self.machine = machine
        self.scheduler = scheduler
    }

    var isKilled: Bool { killed.withLock { $0 } }

    /// Kills the process at the seam where its threads are.
    func kill() {
        guard
            !killed.withLock({
                let was = $0; $0 = true; return was
            })
        else { return }
        scheduler.kill(process: id)
        for fd in descriptors.withLock({ $0 }) { _ = disk.close(fd) }
        descriptors.withLock { $0.removeAll() }
        machine.processDied(id)
    }

    // MARK: Threads

    /// Starts the process: its main thread runs `main`, and a thread of its own runs the
    /// background work its store schedules (flushes, index builds), when the scheduler chooses it.
    func start(_ main: @escaping @Sendable (SimulatedProcess) -> Void) {
        let flushes = scheduler.spawn("P\(id).background", process: id) { [self] in runBackgroundWork() }
        flusher.withLock { $0 = flushes }
        scheduler.spawn("P\(id).main", process: id) { [self] in main(self) }
    }

    /// Where the store's background work (flushes, index builds) goes: to this process's
    /// background thread.
    var backgroundScheduler: BackgroundScheduler {
        BackgroundScheduler { [self] flush in
            background.withLock { $0.append(flush) }
            if let thread = flusher.withLock({ $0 }) { scheduler.wake(thread) }
        }
    }

    private func runBackgroundWork() {
        guard let thread = SimulationScheduler.SimulatedThread.current else { return }
        while !isKilled, !thread.freeRunning {
            if let flush = background.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                flush()
            } else {
                scheduler.idle(thread)
            }
        }
    }

    // MARK: Seams

    /// Before a call: a seam for the simulated threads of this run (the thread stops until the
    /// scheduler chooses it again); then `EIO` if the process was killed meanwhile. Other threads
    /// (a queue of the library's own) pass straight through.
    private func enter(_ label: @autoclosure () -> String) -> Errno? {
        guard let thread = SimulationScheduler.SimulatedThread.current, thread.scheduler === scheduler else {
            return nil
        }
        if isKilled || thread.freeRunning { return .ioError }
        scheduler.seam(thread, label())
        return isKilled || thread.freeRunning ? .ioError : nil
    }

    private func call<T>(_ label: @autoclosure () -> String, _ body: () -> Result<T, Errno>) -> Result<T, Errno> {
        if let error = enter(label()) { return .failure(error) }
        return body()
    }

    /// Waits for what `attempt` answers `EWOULDBLOCK` (or `EBUSY`) for, letting the others run.
    private func waiting<T>(_ attempt: () -> Result<T, Errno>) -> Result<T, Errno> {
        while true {
            let result = attempt()
            guard case .failure(let error) = result, error == .wouldBlock || error == Errno(EBUSY) else {
                return result
            }
            guard let thread = SimulationScheduler.SimulatedThread.current, thread.scheduler === scheduler else {
                return result
            }
            thread.letOthersRun()
            if isKilled || thread.freeRunning { return .failure(.ioError) }
        }
    }

    private func opened(_ result: Result<Int32, Errno>) -> Result<Int32, Errno> {
        if case .success(let fd) = result { descriptors.withLock { _ = $0.insert(fd) } }
        return result
    }

    private var denial: Errno { machine.deniesWithNotPermitted ? .notPermitted : .accessDenied }

    /// Whether a write of `count` bytes at `offset` would grow the file open on `fd`.
    private func grows(_ fd: Int32, to end: Int) -> Bool {
        guard case .success(let status) = disk.status(fd) else { return false }
        return end > status.size
    }

    // MARK: FileSystem

    func openDirectory(atPath path: String) -> Result<Int32, Errno> {
        call("openDirectory \(path)") { opened(disk.openDirectory(atPath: path)) }
    }

    func makeDirectory(atPath path: String, mode: mode_t) -> Result<Void, Errno> {
        call("mkdir \(path)") { disk.makeDirectory(atPath: path, mode: mode) }
    }

    func open(in directory: Int32, _ name: String, flags: Int32, mode: mode_t) -> Result<Int32, Errno> {
        call("open \(name)") {
            if machine.faults.withLock({ $0.denied }) { return .failure(denial) }
            return opened(disk.open(in: directory, name, flags: flags, mode: mode))
        }
    }

    func makeDirectory(in directory: Int32, _ name: String, path: String, mode: mode_t) -> Result<Void, Errno> {
        call("mkdir \(name)") { disk.makeDirectory(in: directory, name, path: path, mode: mode) }
    }

    func protectionClass(ofItemAt path: String) -> Result<ProtectionClass, Errno> {
        call("protection class \(path)") { disk.protectionClass(ofItemAt: path) }
    }

    func removeDataProtection(ofItemAt path: String) -> Result<Void, Errno> {
        call("remove protection \(path)") { disk.removeDataProtection(ofItemAt: path) }
    }

    func status(in directory: Int32, _ name: String) -> Result<FileStatus, Errno> {
        call("stat \(name)") { disk.status(in: directory, name) }
    }

    func status(_ fd: Int32) -> Result<FileStatus, Errno> {
        call("fstat \(fd)") { disk.status(fd) }
    }

    func close(_ fd: Int32) -> Result<Void, Errno> {
        call("close \(fd)") {
            descriptors.withLock { _ = $0.remove(fd) }
            return disk.close(fd)
        }
    }

    func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Result<Int, Errno> {
        call("pread \(fd) \(buffer.count)@\(offset)") { disk.read(fd, into: buffer, at: offset) }
    }

    func write(_ fd: Int32, from bytes: UnsafeRawBufferPointer, at offset: Int) -> Result<Int, Errno> {
        call("pwrite \(fd) \(bytes.count)@\(offset)") {
            if machine.faults.withLock({ $0.diskFull }), grows(fd, to: offset + bytes.count) {
                return .failure(.noSpace)
            }
            return disk.write(fd, from: bytes, at: offset)
        }
    }

    func sync(_ fd: Int32, dataOnly: Bool) -> Result<Void, Errno> {
        call("sync \(fd)") {
            if machine.faults.withLock({ $0.fullFlushUnsupported }) { return .failure(Errno(ENOTTY)) }
            return disk.sync(fd, dataOnly: dataOnly)
        }
    }

    func syncToDrive(_ fd: Int32) -> Result<Void, Errno> {
        call("fsync \(fd)") { disk.sync(fd, dataOnly: false) }
    }

    func truncate(_ fd: Int32, to length: Int) -> Result<Void, Errno> {
        call("ftruncate \(fd) \(length)") { disk.truncate(fd, to: length) }
    }

    func allocate(_ fd: Int32, offset: Int, length: Int) -> Result<Void, Errno> {
        call("fallocate \(fd) \(length)@\(offset)") {
            if machine.faults.withLock({ $0.diskFull }), grows(fd, to: offset + length) { return .failure(.noSpace) }
            return disk.allocate(fd, offset: offset, length: length)
        }
    }

    func rename(in directory: Int32, _ source: String, to destination: String) -> Result<Void, Errno> {
        call("rename \(source) \(destination)") { disk.rename(in: directory, source, to: destination) }
    }

    func renameWithoutReplacing(in directory: Int32, _ source: String, to destination: String) -> Result<Void, Errno> {
        call("rename (no replace) \(source) \(destination)") {
            disk.renameWithoutReplacing(in: directory, source, to: destination)
        }
    }

    func unlink(in directory: Int32, _ name: String) -> Result<Void, Errno> {
        call("unlink \(name)") { disk.unlink(in: directory, name) }
    }

    func entries(of directory: Int32) -> Result<[String], Errno> {
        call("list \(directory)") { disk.entries(of: directory) }
    }

    func lock(_ fd: Int32, _ mode: FileLockMode, waiting: Bool) -> Result<Void, Errno> {
        call("flock \(mode) \(fd)\(waiting ? "" : " (no wait)")") {
            guard waiting, mode != .unlocked, SimulationScheduler.SimulatedThread.current != nil else {
                return disk.lock(fd, mode, waiting: waiting)
            }
            return self.waiting { disk.lock(fd, mode, waiting: false) }
        }
    }

    func map(_ fd: Int32, length: Int) -> Result<UnsafeMutableRawPointer, Errno> {
        call("mmap \(fd) \(length)") { disk.map(fd, length: length) }
    }

    func mapReadOnly(_ fd: Int32, length: Int) -> Result<UnsafeRawPointer, Errno> {
        call("mmap read-only \(fd) \(length)") { disk.mapReadOnly(fd, length: length) }
    }

    func unmap(_ address: UnsafeMutableRawPointer, length: Int) {
        disk.unmap(address, length: length)
    }

    func prefaultForWriting(_ address: UnsafeMutableRawPointer, offset: Int, length: Int) -> Result<Void, Errno> {
        disk.prefaultForWriting(address, offset: offset, length: length)
    }

    func willWriteMapping(_ address: UnsafeMutableRawPointer, offset: Int, length: Int) -> Result<Void, Errno> {
        call("write through mapping \(length)@\(offset)") {
            disk.willWriteMapping(address, offset: offset, length: length)
        }
    }

    func fileSystemType(_ fd: Int32) -> Result<Int64, Errno> {
        call("fstatfs \(fd)") { disk.fileSystemType(fd) }
    }

    // MARK: The commit lock's mutex, simulated

    func initializeSharedMutex(at address: UnsafeMutableRawPointer) -> Result<Void, Errno> {
        call("mutex init") {
            machine.mutexes.withLock { $0[Int(bitPattern: address)] = SimulatedMachine.Mutex() }
            return .success(())
        }
    }

    func lockSharedMutex(at address: UnsafeMutableRawPointer) -> Result<MutexAcquisition, Errno> {
        call("mutex lock") {
            guard let thread = SimulationScheduler.SimulatedThread.current else { return .failure(Errno(EINVAL)) }
            return waiting {
                machine.mutexes.withLock { mutexes -> Result<MutexAcquisition, Errno> in
                    var mutex = mutexes[Int(bitPattern: address)] ?? SimulatedMachine.Mutex()
                    defer { mutexes[Int(bitPattern: address)] = mutex }
                    if mutex.notRecoverable { return .failure(Errno(ENOTRECOVERABLE)) }
                    if let owner = mutex.owner {
                        return owner.thread == thread.id ? .failure(Errno(EDEADLK)) : .failure(Errno(EBUSY))
                    }
                    mutex.owner = (thread.id, id)
                    guard mutex.ownerDied else { return .success(.acquired) }
                    mutex.ownerDied = false
                    mutex.inconsistent = true
                    return .success(.ownerDied)
                }
            }
        }
    }

    func markSharedMutexConsistent(at address: UnsafeMutableRawPointer) -> Result<Void, Errno> {
        call("mutex consistent") {
            let thread = SimulationScheduler.SimulatedThread.current?.id
            return machine.mutexes.withLock { mutexes in
                guard var mutex = mutexes[Int(bitPattern: address)], mutex.inconsistent, mutex.owner?.thread == thread
                else { return .failure(Errno(EINVAL)) }
                mutex.inconsistent = false
                mutexes[Int(bitPattern: address)] = mutex
                return .success(())
            }
        }
    }

    func unlockSharedMutex(at address: UnsafeMutableRawPointer) {
        _ = call("mutex unlock") { () -> Result<Void, Errno> in
            let thread = SimulationScheduler.SimulatedThread.current?.id
            machine.mutexes.withLock { mutexes in
                guard var mutex = mutexes[Int(bitPattern: address)], mutex.owner?.thread == thread else { return }
                if mutex.inconsistent {
                    mutex.inconsistent = false
                    mutex.notRecoverable = true
                }
                mutex.owner = nil
                mutexes[Int(bitPattern: address)] = mutex
            }
            return .success(())
        }
    }

    var effectiveUserID: UInt32 { disk.effectiveUserID }
    var bootIdentity: BootIdentity { disk.bootIdentity }
}
