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

/// The lock rules each engine component writes at the top of its files (see `EngineState`),
/// checked from the seams: the file system sees every write, flush and lock with the locks the
/// calling thread holds, and the user's types, closures and observers see whether they run under
/// one. Each test names the component whose rule it checks; the rules checked elsewhere:
/// - the log and recovery: no flush and no rewrite under the commit lock
///   (`LockContractTests.noFlushOrRewriteHappensWhileTheFileLockIsHeld`);
/// - the coordination page: `flock` taken and released only under the engine's lock
///   (`FlushOutsideTheLockTests.theCommitLockIsTakenAndReleasedOnlyUnderTheEngineLock`);
/// - every component: no logger call under a lock (`LockContractTests`), no `update` closure
///   under a lock, no decoding for a value stream under a lock.
///
/// Each runs with either commit lock (the Linux mutex with mapped appends, Apple's `flock` with
/// `pwrite` appends), whatever the build's platform.
@Suite struct ComponentContractTests {
    static let fileLocks = [false, true]

    /// A file-system call the engine made, with the file it was about and the locks held.
    struct Call: CustomStringConvertible {
        enum Kind: String {
            case write, mappedWrite, allocate, truncate, sync, takeCommitLock
        }

        var kind: Kind
        /// The file's name in the store's folder; `?` when not known (a directory).
        var name: String
        var offset: Int
        var engineLock: Bool
        var commitLock: Bool

        var description: String {
            "\(kind) \(name) at \(offset)\(engineLock ? ", engine lock" : "")\(commitLock ? ", commit lock" : "")"
        }
    }

    /// Records the calls of ``Call/Kind`` with the names of the files they are about.
    final class ContractFileSystem: ForwardingFileSystem, @unchecked Sendable {
        // @unchecked: `names`, `mappings` and `recorded` are only touched under `lock`.
        let base: any FileSystem = SystemFileSystem()
        private let lock = NSLock()
        private var names: [Int32: String] = [:]
        private var mappings: [UnsafeMutableRawPointer: String] = [:]
        private var recorded: [Call] = []
        private var recording = false

        /// Records calls from now on (what came before is forgotten).
        func startRecording() {
            lock.withLock {
                recorded.removeAll()
                recording = true
            }
        }

        var calls: [Call] { lock.withLock { recorded } }

        private func record(_ kind: Call.Kind, name: String, offset: Int = 0) {
            let call = Call(
                kind: kind, name: name, offset: offset, engineLock: LockWitness.isHolding(.engine),
                commitLock: LockWitness.isHolding(.file))
            lock.withLock { if recording { recorded.append(call) } }
        }

        private func name(of fd: Int32) -> String { lock.withLock { names[fd] ?? "?" } }

        func open(in directory: Int32, _ name: String, flags: Int32, mode: mode_t) -> Result<Int32, Errno> {
            let result = base.open(in: directory, name, flags: flags, mode: mode)
            if case .success(let fd) = result { lock.withLock { names[fd] = name } }
            return result
        }

        func close(_ fd: Int32) -> Result<Void, Errno> {
            lock.withLock { names[fd] = nil }
            return base.close(fd)
        }

        func write(_ fd: Int32, from bytes: UnsafeRawBufferPointer, at offset: Int) -> Result<Int, Errno> {
            record(.write, name: name(of: fd), offset: offset)
            return base.write(fd, from: bytes, at: offset)
        }

        func allocate(_ fd: Int32, offset: Int, length: Int) -> Result<Void, Errno> {
            record(.allocate, name: name(of: fd), offset: offset)
            return base.allocate(fd, offset: offset, length: length)
        }

        func truncate(_ fd: Int32, to length: Int) -> Result<Void, Errno> {
            record(.truncate, name: name(of: fd), offset: length)
            return base.truncate(fd, to: length)
        }

        func sync(_ fd: Int32, dataOnly: Bool) -> Result<Void, Errno> {
            record(.sync, name: name(of: fd))
            return base.sync(fd, dataOnly: dataOnly)
        }

        func syncToDrive(_ fd: Int32) -> Result<Void, Errno> {
            record(.sync, name: name(of: fd))
            return base.syncToDrive(fd)
        }

        func map(_ fd: Int32, length: Int) -> Result<UnsafeMutableRawPointer, Errno> {
            let result = base.map(fd, length: length)
            if case .success(let address) = result {
                let name = name(of: fd)
                lock.withLock { mappings[address] = name }
            }
            return result
        }

        func unmap(_ address: UnsafeMutableRawPointer, length: Int) {
            lock.withLock { mappings[address] = nil }
            base.unmap(address, length: length)
        }

        func willWriteMapping(_ address: UnsafeMutableRawPointer, offset: Int, length: Int) -> Result<Void, Errno> {
            record(.mappedWrite, name: lock.withLock { mappings[address] ?? "?" }, offset: offset)
            return base.willWriteMapping(address, offset: offset, length: length)
        }

        func lock(_ fd: Int32, _ mode: FileLockMode, waiting: Bool) -> Result<Void, Errno> {
            let name = name(of: fd)
            if name == StoreLocation.lockFileName, mode == .exclusive { record(.takeCommitLock, name: name) }
            return base.lock(fd, mode, waiting: waiting)
        }

        func lockSharedMutex(at address: UnsafeMutableRawPointer) -> Result<MutexAcquisition, Errno> {
            record(.takeCommitLock, name: StoreLocation.lockFileName)
            return base.lockSharedMutex(at: address)
        }
    }

    /// Stores whose file-system calls are recorded and whose background flushes run at once.
    struct Harness {
        let fileSystem = ContractFileSystem()
        let flushes = ImmediateFlushes()
        let options: Engine.Options

        init(fileLock: Bool) {
            var options = Engine.Options()
            options.usesFileLock = fileLock
            options.flushScheduler = flushes.scheduler
            self.options = options
        }

        func open(_ directory: URL, durability: TinyStorage.Durability = .standard) -> TinyStorage {
            openStore(directory, durability: durability, io: FileIO(fileSystem: fileSystem), options: options)
        }
    }

    /// The log: records reach the data file (written, written through its mapping, space
    /// allocated for them, or cut) only under the commit lock, inside the engine's lock; the only
    /// write to the data file without them is the durable mark in its header, after a flush.
    /// Commits of one key and of many, removes, another process's commits caught up with, a
    /// compaction, and the remains of a dead append cut by the next commit.
    @Test(arguments: fileLocks)
    func theLogIsWrittenOnlyUnderTheCommitLock(fileLock: Bool) throws {
        try withTemporaryDirectory { directory throws in
            let harness = Harness(fileLock: fileLock)
            let fileSystem = harness.fileSystem
            let writer = harness.open(directory, durability: .immediate)
            let other = harness.open(directory)
            fileSystem.startRecording()
            for index in 0..<30 {
                try writer.storeOrThrow(index, forKey: "key\(index % 5)")
                try other.storeOrThrow("value \(index)", forKey: "other\(index % 3)")
            }
            try writer.update("counter", as: Int.self) { $0 = ($0 ?? 0) + 1 }
            try writer.bulkStoreOrThrow(items: ["a": 1, "b": 2])
            try writer.bulkStoreOrThrow(items: ["a": nil] as [String: (any Encodable)?])
            try writer.compactNow()
            try other.storeOrThrow("after the compaction", forKey: "other0")
            try writer.engine.holdCommitLock(leaving: .tornRecord) {}
            try other.storeOrThrow("after the torn record", forKey: "other1")
            try writer.synchronize()
            harness.flushes.finish()

            let dataFileCalls = fileSystem.calls.filter { $0.name == StoreLocation.dataFileName }
            #expect(dataFileCalls.contains { $0.kind == .write || $0.kind == .mappedWrite }, "no record was seen")
            let outside = dataFileCalls.filter { call in
                call.kind != .sync && !(call.engineLock && call.commitLock)
                    && !(call.kind == .write && call.offset < LogFormat.headerSize)
            }
            #expect(outside.isEmpty, "written outside the commit lock: \(outside.prefix(5))")
            let reopened = openStore(directory)
            #expect(reopened.integer(forKey: "counter") == 1)
            #expect(reopened.retrieve(type: String.self, forKey: "other1") == "after the torn record")
            #expect(reopened.retrieve(type: String.self, forKey: "unacknowledged") == nil)
        }
    }

    /// Durability: once a store is open, a commit's flush (`.immediate`, `synchronize()`, the
    /// background flush of `.standard` commits, group commits from several threads) runs with no
    /// lock of the store held, neither the commit lock nor the engine's: other threads read and
    /// commit while the disk works.
    @Test(arguments: fileLocks)
    func aCommitsFlushHoldsNoLockOfTheStore(fileLock: Bool) throws {
        try withTemporaryDirectory { directory throws in
            let harness = Harness(fileLock: fileLock)
            let fileSystem = harness.fileSystem
            let durable = harness.open(directory, durability: .immediate)
            let standard = harness.open(directory)
            try durable.storeOrThrow(0, forKey: "created")  // the data file's creation flushes its name
            _ = standard.integer(forKey: "created")
            harness.flushes.finish()
            fileSystem.startRecording()
            DispatchQueue.concurrentPerform(iterations: 4) { thread in
                for index in 0..<10 { durable.store(index, forKey: "durable\(thread)") }
            }
            for index in 0..<10 { try standard.storeOrThrow(index, forKey: "standard") }
            try standard.synchronize()
            harness.flushes.finish()

            let syncs = fileSystem.calls.filter { $0.kind == .sync }
            #expect(syncs.count >= 2, "the commits were flushed")
            let locked = syncs.filter { $0.engineLock || $0.commitLock }
            #expect(locked.isEmpty, "flushed under a lock: \(locked.prefix(5))")
        }
    }

    /// The coordination page's commit lock (the mutex in the page, or `flock` on the lock file)
    /// is taken only by a thread that holds the engine's lock: the lock order that keeps two
    /// threads of a process from deadlocking, and a flush from letting go of a commit's lock.
    @Test(arguments: fileLocks)
    func theCommitLockIsTakenOnlyInsideTheEngineLock(fileLock: Bool) throws {
        try withTemporaryDirectory { directory throws in
            let harness = Harness(fileLock: fileLock)
            let fileSystem = harness.fileSystem
            fileSystem.startRecording()
            let writer = harness.open(directory, durability: .immediate)
            let other = harness.open(directory)
            for index in 0..<20 {
                try writer.storeOrThrow(index, forKey: "key\(index % 4)")
                try other.storeOrThrow(index, forKey: "other\(index % 3)")
                _ = writer.integer(forKey: "other0")
            }
            try writer.compactNow()
            try writer.engine.holdCommitLock(leaving: .halfPublished) {}
            _ = other.integer(forKey: "key0")
            try other.storeOrThrow(1, forKey: "after")
            harness.flushes.finish()

            let takes = fileSystem.calls.filter { $0.kind == .takeCommitLock }
            #expect(takes.count >= 40, "every commit takes the commit lock")
            let outside = takes.filter { !$0.engineLock }
            #expect(outside.isEmpty, "taken outside the engine's lock: \(outside.prefix(5))")
        }
    }

    /// A value whose `Codable` conformance notes whether a lock of the store was held, and reads
    /// the store (which would deadlock under its lock).
    struct WitnessingValue: Codable, Sendable, Equatable {
        static let witness = Locked<(storage: TinyStorage?, encodedUnderLock: [Bool], decodedUnderLock: [Bool])>(
            (nil, [], []))
        var number: Int

        init(_ number: Int) { self.number = number }

        init(from decoder: any Decoder) throws {
            number = try decoder.singleValueContainer().decode(Int.self)
            let storage = Self.witness.withLock { witness in
                witness.decodedUnderLock.append(LockWitness.isHoldingAnyLock)
                return witness.storage
            }
            _ = storage?.integer(forKey: "other")
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(number)
            let storage = Self.witness.withLock { witness in
                witness.encodedUnderLock.append(LockWitness.isHoldingAnyLock)
                return witness.storage
            }
            _ = storage?.integer(forKey: "other")
        }
    }

    /// The index: a value is encoded before a commit takes any lock, and decoded after a read
    /// let go of it (the user's `Codable` code may use the store): by `store`, `retrieve`, a
    /// typed key's subscript, `update`, and `bulkStore`.
    @Test(.timeLimit(.minutes(1)))
    func valuesAreEncodedAndDecodedUnderNoLock() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            WitnessingValue.witness.withLock { $0 = (storage, [], []) }
            defer { WitnessingValue.witness.withLock { $0 = (nil, [], []) } }
            let key = TinyStorage.Key<WitnessingValue>("typed", default: WitnessingValue(0))

            try storage.storeOrThrow(WitnessingValue(1), forKey: "plain")
            #expect(storage.retrieve(type: WitnessingValue.self, forKey: "plain") == WitnessingValue(1))
            storage[key] = WitnessingValue(2)
            let other = openStore(directory)  // a store whose cache holds nothing yet
            #expect(other[key] == WitnessingValue(2))
            try storage.update("plain", as: WitnessingValue.self) { value in value?.number += 1 }
            try storage.bulkStoreOrThrow(items: ["bulk": WitnessingValue(4)])
            #expect(other.retrieve(type: WitnessingValue.self, forKey: "plain") == WitnessingValue(2))

            let (encoded, decoded) = WitnessingValue.witness.withLock { ($0.encodedUnderLock, $0.decodedUnderLock) }
            #expect(encoded.count >= 4 && decoded.count >= 3, "encoded \(encoded.count), decoded \(decoded.count)")
            #expect(!encoded.contains(true), "encoded under a lock")
            #expect(!decoded.contains(true), "decoded under a lock")
        }
    }

    /// Changes: a change is announced with no lock of the store held, to a notification
    /// observer that reads the store, whether the commit was this process's or another
    /// instance's (caught up with by the file watch).
    @Test(.timeLimit(.minutes(1)))
    func changesAreAnnouncedUnderNoLock() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let other = openStore(directory)
            let announced = Arrivals<(underLock: Bool, value: Int)>()
            let observer = NotificationCenter.default.addObserver(
                forName: TinyStorage.didChangeNotification, object: storage, queue: nil
            ) { notification in
                guard let keys = notification.userInfo?[TinyStorage.changedKeysUserInfoKey] as? [String],
                    keys.contains("count")
                else { return }
                let underLock = LockWitness.isHoldingAnyLock
                // NB: under the store's lock, this read deadlocks (Linux) or traps (Apple).
                announced.append((underLock, storage.integer(forKey: "count")))
            }
            defer { NotificationCenter.default.removeObserver(observer) }
            try storage.storeOrThrow(1, forKey: "count")
            _ = announced.wait(forCount: 1)
            try other.storeOrThrow(2, forKey: "count")
            let announcements = announced.wait(forCount: 2)
            #expect(announcements.map(\.value) == [1, 2])
            #expect(!announcements.contains { $0.underLock }, "announced under a lock: \(announcements)")
        }
    }
}
