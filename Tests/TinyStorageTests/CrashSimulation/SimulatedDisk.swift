import Foundation
import Testing

@testable import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An in-memory ``FileSystem`` that models a disk with a volatile write cache, and the power
/// loss that empties it.
///
/// The tree starts with `/` and `/sim`, both durable. Descriptors are fake numbers from 1000;
/// every file belongs to ``effectiveUserID``. The calls answer as Linux does (`ENOENT`,
/// `EEXIST`, `ENOTDIR`, `EISDIR`, `ELOOP` for `O_NOFOLLOW` on a link, `EBADF`…), `flock` blocks
/// between descriptors (other threads and store instances wait), and `mmap` gives a stable,
/// page-aligned pointer shared by every mapping of a file, coherent with `pread` and `pwrite`.
///
/// **Durability.** A file's writes, truncations and allocations reach its durable contents only
/// at `sync` (`fsync`/`fdatasync`); so do bytes written through a mapping (the store's appends
/// on Linux; an `msync` would be ``syncMapping(_:length:)``). A directory's creates, renames and unlinks reach its
/// durable names only when that directory is synced (ext4's default). ``crash(seed:)`` makes the
/// disk a power loss could leave (see `SimulatedDisk+Crash.swift`).
///
/// **Crashing a running store.** ``armCrash(atChange:)`` picks a call that changes the disk
/// (write, a write through a mapping, truncate, allocate, sync, `syncMapping`, create, mkdir,
/// rename, unlink, open with `O_TRUNC`): it and every later call fail with `EIO`, so the store stops there, and the disk
/// keeps the state of that instant for ``crash(seed:)``.
///
/// Not modelled: permissions (every call is allowed, as for root), disk space (`ENOSPC`), the
/// process ID (temporary files of "the crashed process" look alive to the next open), renames
/// across directories (`EXDEV`), `SIGBUS` past the end of a mapping, data written back in
/// whole pages rather than sectors, and file systems that order data before metadata
/// (`data=ordered`, `auto_da_alloc`): this disk loses what they would keep.
final class SimulatedDisk: FileSystem, @unchecked Sendable {
    // @unchecked: `state` is only touched while holding `condition`. Mapped regions are written
    // by the store without it, as shared memory is; the disk reads them under it.
    static let sectorSize = 512
    static let device: UInt64 = 0x51D
    /// The owner of every file, and what ``effectiveUserID`` answers.
    static let user: UInt32 = 4321

    private let condition = NSCondition()
    private var state: State
    /// What `fstatfs` answers for its files: tmpfs (`0x01021994`), where the store appends
    /// through a mapping, unless a test asks for another (btrfs: `pwrite`, see `AppendMapping`).
    let fileSystemType: Int64

    /// A disk holding `/` and `/sim`, both durable.
    init(boot: BootIdentity = BootIdentity(high: 1, low: 1), fileSystemType: Int64 = AppendMapping.tmpfs) {
        state = State(boot: boot)
        self.fileSystemType = fileSystemType
        let root = Node(inode: State.rootInode, kind: .directory, permissions: 0o755, owner: 0)
        root.parent = State.rootInode
        state.nodes[root.inode] = root
        _ = state.create(.directory, named: "sim", in: root.inode, permissions: 0o755, owner: Self.user)
        root.makeDurable()
    }

    /// A disk holding `state`, all of it durable: what a crash left.
    init(recovered state: State, fileSystemType: Int64) {
        self.state = state
        self.fileSystemType = fileSystemType
    }

    /// `FileIO` on this disk, for `TinyStorage(insideDirectory:…io:)`.
    var io: FileIO { FileIO(fileSystem: self) }

    /// Runs `body` under the disk's lock.
    func withState<R>(_ body: (inout State) -> R) -> R {
        condition.lock()
        defer { condition.unlock() }
        return body(&state)
    }

    // MARK: Crashing

    /// Makes the `index`-th call that changes the disk (counted from 0 since the disk was made),
    /// and every call after it, fail with `EIO`, keeping the state of that instant.
    func armCrash(atChange index: Int) {
        withState { state in
            state.crashAtChange = index
            if state.changeCount >= index { Self.freeze(&state) }
        }
        condition.broadcast()
    }

    /// Forgets an armed crash that has not come yet.
    func disarm() {
        withState { $0.crashAtChange = nil }
    }

    /// Calls that changed the disk so far (the index the next one would have).
    var changeCount: Int { withState { $0.changeCount } }

    /// Threads waiting in `lock` right now.
    var lockWaiterCount: Int { withState { $0.lockWaiters } }

    /// Whether the disk has crashed: every call now fails with `EIO`.
    var isCrashed: Bool { withState { $0.isCrashed } }

    /// Stops the disk now, as ``armCrash(atChange:)`` does when its call comes.
    func crashNow() {
        withState { Self.freeze(&$0) }
        condition.broadcast()
    }

    /// Takes in what mappings hold, then stops every call: the state a crash works from.
    private static func freeze(_ state: inout State) {
        guard !state.isCrashed else { return }
        for node in state.nodes.values { node.absorbMapping() }
        state.isCrashed = true
    }

    /// Starts a call: `EIO` once crashed; for calls that change the disk, counts it and crashes
    /// when it is the armed one.
    func begin(_ state: inout State, changes: Bool) -> Errno? {
        if state.isCrashed { return .ioError }
        guard changes else { return nil }
        if let index = state.crashAtChange, state.changeCount >= index {
            Self.freeze(&state)
            condition.broadcast()
            return .ioError
        }
        state.changeCount += 1
        return nil
    }

    // MARK: FileSystem: descriptors

    func status(_ fd: Int32) -> Result<FileStatus, Errno> {
        withState { state in
            if let error = begin(&state, changes: false) { return .failure(error) }
            return Self.node(of: fd, &state).map { node, _ in node.status() }
        }
    }

    func close(_ fd: Int32) -> Result<Void, Errno> {
        let result: Result<Void, Errno> = withState { state in
            guard let descriptor = state.descriptors.removeValue(forKey: fd) else { return .failure(Errno(EBADF)) }
            state.lockHolders[descriptor.inode]?[fd] = nil
            return state.isCrashed ? .failure(.ioError) : .success(())
        }
        condition.broadcast()
        return result
    }

    func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Result<Int, Errno> {
        withState { state in
            if let error = begin(&state, changes: false) { return .failure(error) }
            return Self.regularFile(fd, &state, needs: \.readable).flatMap { node in
                guard offset >= 0 else { return .failure(Errno(EINVAL)) }
                node.absorbMapping()
                let count = max(0, min(buffer.count, node.size - offset))
                if count > 0 {
                    node.contents.withUnsafeBytes { raw in
                        buffer.baseAddress?.copyMemory(from: raw.baseAddress! + offset, byteCount: count)
                    }
                }
                return .success(count)
            }
        }
    }

    func write(_ fd: Int32, from bytes: UnsafeRawBufferPointer, at offset: Int) -> Result<Int, Errno> {
        withState { state in
            Self.regularFile(fd, &state, needs: \.writable).flatMap { node in
                guard offset >= 0 else { return .failure(Errno(EINVAL)) }
                if let error = begin(&state, changes: true) { return .failure(error) }
                node.absorbMapping()
                node.record(.write(offset: offset, bytes: Array(bytes)))
                return .success(bytes.count)
            }
        }
    }

    func sync(_ fd: Int32, dataOnly: Bool) -> Result<Void, Errno> {
        withState { state in
            Self.node(of: fd, &state).flatMap { node, descriptor in
                if descriptor.pathOnly { return .failure(Errno(EBADF)) }
                if let error = begin(&state, changes: true) { return .failure(error) }
                node.makeDurable()
                return .success(())
            }
        }
    }

    func truncate(_ fd: Int32, to length: Int) -> Result<Void, Errno> {
        withState { state in
            Self.regularFile(fd, &state, needs: \.writable, otherwise: Errno(EINVAL)).flatMap { node in
                guard length >= 0 else { return .failure(Errno(EINVAL)) }
                if let error = begin(&state, changes: true) { return .failure(error) }
                node.absorbMapping()
                node.record(.resize(length))
                return .success(())
            }
        }
    }

    func allocate(_ fd: Int32, offset: Int, length: Int) -> Result<Void, Errno> {
        withState { state in
            Self.regularFile(fd, &state, needs: \.writable).flatMap { node in
                guard offset >= 0, length > 0 else { return .failure(Errno(EINVAL)) }
                if let error = begin(&state, changes: true) { return .failure(error) }
                node.absorbMapping()
                if offset + length > node.size { node.record(.resize(offset + length)) }
                return .success(())
            }
        }
    }

    func lock(_ fd: Int32, _ mode: FileLockMode, waiting: Bool) -> Result<Void, Errno> {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let error = begin(&state, changes: false) { return .failure(error) }
            guard let descriptor = state.descriptors[fd] else { return .failure(Errno(EBADF)) }
            if descriptor.pathOnly { return .failure(Errno(EBADF)) }
            var holders = state.lockHolders[descriptor.inode] ?? [:]
            guard mode != .unlocked else {
                if holders.removeValue(forKey: fd) != nil {
                    state.lockHolders[descriptor.inode] = holders
                    condition.broadcast()
                }
                return .success(())
            }
            // NB: as flock(2), a descriptor changing its own lock is in nobody's way but others'.
            let others = holders.filter { $0.key != fd }.values
            let blocked = mode == .exclusive ? !others.isEmpty : others.contains(.exclusive)
            if !blocked {
                holders[fd] = mode
                state.lockHolders[descriptor.inode] = holders
                condition.broadcast()  // a conversion from exclusive to shared lets others in
                return .success(())
            }
            guard waiting else { return .failure(.wouldBlock) }
            // Another descriptor holds it: wait for an unlock, a close or a crash.
            state.lockWaiters += 1
            condition.wait()
            state.lockWaiters -= 1
        }
    }

    func map(_ fd: Int32, length: Int) -> Result<UnsafeMutableRawPointer, Errno> {
        map(fd, length: length, writable: true)
    }

    /// A shared mapping as ``map(_:length:)`` makes; writes through it are not refused here, the
    /// engine's read-only mode never makes any (its tests run on the system's file system).
    func mapReadOnly(_ fd: Int32, length: Int) -> Result<UnsafeRawPointer, Errno> {
        map(fd, length: length, writable: false).map { UnsafeRawPointer($0) }
    }

    private func map(_ fd: Int32, length: Int, writable: Bool) -> Result<UnsafeMutableRawPointer, Errno> {
        withState { state in
            if let error = begin(&state, changes: false) { return .failure(error) }
            return Self.node(of: fd, &state).flatMap { node, descriptor in
                guard node.kind == .regular else { return .failure(Errno(ENODEV)) }
                guard descriptor.readable && (descriptor.writable || !writable) else { return .failure(.accessDenied) }
                guard length > 0 else { return .failure(Errno(EINVAL)) }
                guard length <= MappedRegion.capacity else { return .failure(Errno(ENOMEM)) }
                if node.mapping == nil {
                    guard let region = MappedRegion(contents: node.contents) else { return .failure(Errno(ENOMEM)) }
                    node.mapping = region
                    state.mappedInodes[region.base] = node.inode
                }
                guard let region = node.mapping else { return .failure(Errno(ENOMEM)) }
                region.users += 1
                return .success(region.base)
            }
        }
    }

    func unmap(_ address: UnsafeMutableRawPointer, length: Int) {
        withState { state in
            guard let inode = state.mappedInodes[address], let node = state.nodes[inode], let region = node.mapping
            else { return }
            region.users -= 1
            guard region.users == 0 else { return }
            if !state.isCrashed { node.absorbMapping() }
            node.mapping = nil
            state.mappedInodes[address] = nil
        }
    }

    /// A write through a mapping, counted as a change: a crash armed here comes before it (the
    /// store then writes nothing), one armed at the next change after it. A write past the end
    /// of the file, which the kernel answers with `SIGBUS`, fails with `EFAULT` and writes nothing.
    func willWriteMapping(_ address: UnsafeMutableRawPointer, offset: Int, length: Int) -> Result<Void, Errno> {
        withState { state in
            guard let inode = state.mappedInodes[address], let node = state.nodes[inode], node.mapping != nil,
                offset >= 0, length >= 0, offset + length <= node.size
            else { return state.isCrashed ? .failure(.ioError) : .failure(Errno(EFAULT)) }
            if let error = begin(&state, changes: true) { return .failure(error) }
            return .success(())
        }
    }

    /// Faulting pages in changes nothing on the disk. As the kernel does, it refuses pages past
    /// the end of the file (`EFAULT`, where a touch would be `SIGBUS`).
    func prefaultForWriting(_ address: UnsafeMutableRawPointer, offset: Int, length: Int) -> Result<Void, Errno> {
        withState { state in
            if let error = begin(&state, changes: false) { return .failure(error) }
            guard let inode = state.mappedInodes[address], let node = state.nodes[inode], node.mapping != nil,
                offset >= 0, length >= 0, offset + length <= node.size
            else { return .failure(Errno(EFAULT)) }
            return .success(())
        }
    }

    func fileSystemType(_ fd: Int32) -> Result<Int64, Errno> {
        withState { state in
            if let error = begin(&state, changes: false) { return .failure(error) }
            guard state.descriptors[fd] != nil else { return .failure(Errno(EBADF)) }
            return .success(fileSystemType)
        }
    }

    // MARK: The commit lock: a mutex in a mapping

    /// The real `pthread` calls (robust, process-shared) on the mapped memory, which every thread
    /// shares as a mapping is; they fail with `EIO` once the disk has crashed, as `flock` does.
    /// Not modelled: a holder dying (no thread of a simulated store dies holding it).
    ///
    /// NB: a lock taken after the crash is released at once, and an unlock always unlocks, so no
    /// thread waits forever for a holder whose every call now fails.
    func initializeSharedMutex(at address: UnsafeMutableRawPointer) -> Result<Void, Errno> {
        if isCrashed { return .failure(.ioError) }
        return SystemFileSystem().initializeSharedMutex(at: address)
    }

    func lockSharedMutex(at address: UnsafeMutableRawPointer) -> Result<MutexAcquisition, Errno> {
        let system = SystemFileSystem()
        let acquired = system.lockSharedMutex(at: address)
        guard case .success(let how) = acquired, isCrashed else { return acquired }
        if how == .ownerDied { _ = system.markSharedMutexConsistent(at: address) }
        system.unlockSharedMutex(at: address)
        return .failure(.ioError)
    }

    func markSharedMutexConsistent(at address: UnsafeMutableRawPointer) -> Result<Void, Errno> {
        SystemFileSystem().markSharedMutexConsistent(at: address)
    }

    func unlockSharedMutex(at address: UnsafeMutableRawPointer) {
        SystemFileSystem().unlockSharedMutex(at: address)
    }

    /// `msync(address, length, MS_SYNC)`: makes what was written through the mapping at
    /// `address` durable. Ready for a `FileSystem` requirement of that name (issue 12).
    func syncMapping(_ address: UnsafeMutableRawPointer, length: Int) -> Result<Void, Errno> {
        withState { state in
            guard let inode = state.mappedInodes[address], let node = state.nodes[inode] else {
                return state.isCrashed ? .failure(.ioError) : .failure(Errno(ENOMEM))
            }
            if let error = begin(&state, changes: true) { return .failure(error) }
            node.makeDurable()
            return .success(())
        }
    }

    // MARK: Helpers

    static func newDescriptor(_ state: inout State, _ descriptor: Descriptor) -> Int32 {
        let fd = state.nextDescriptor
        state.nextDescriptor += 1
        state.descriptors[fd] = descriptor
        return fd
    }

    static func node(of fd: Int32, _ state: inout State) -> Result<(Node, Descriptor), Errno> {
        guard let descriptor = state.descriptors[fd], let node = state.nodes[descriptor.inode] else {
            return .failure(Errno(EBADF))
        }
        return .success((node, descriptor))
    }

    /// The regular file open on `fd` with the access `needs` names: `EBADF` (or `otherwise`)
    /// without it, `EISDIR` on a directory, `EINVAL` on other kinds.
    static func regularFile(
        _ fd: Int32, _ state: inout State, needs access: KeyPath<Descriptor, Bool>, otherwise: Errno = Errno(EBADF)
    ) -> Result<Node, Errno> {
        if state.isCrashed { return .failure(.ioError) }
        return node(of: fd, &state).flatMap { node, descriptor in
            if descriptor.pathOnly { return .failure(Errno(EBADF)) }
            if node.kind == .directory { return .failure(.isDirectory) }
            guard descriptor[keyPath: access] else { return .failure(otherwise) }
            guard node.kind == .regular else { return .failure(Errno(EINVAL)) }
            return .success(node)
        }
    }

    /// Resolves `name` relative to the directory open on `directory`.
    static func locate(
        _ name: String, in directory: Int32, followLast: Bool, _ state: inout State
    ) -> Result<Location, Errno> {
        if state.isCrashed { return .failure(.ioError) }
        guard let descriptor = state.descriptors[directory], let node = state.nodes[descriptor.inode] else {
            return .failure(Errno(EBADF))
        }
        guard node.kind == .directory else { return .failure(.notDirectory) }
        return state.locate(name, from: descriptor.inode, followLast: followLast)
    }
}
