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

/// Issue 28, D3, D5 and D7, through the file-system seam: the commit lock has one owner in a
/// process (only a thread holding the engine's lock takes or releases its `flock`, so no flush
/// can let go of a commit's lock); no flush is made under it, cuts of an interrupted write
/// included, and yet a cut is on stable storage before anything is appended after it; and a
/// store works on a file system with no full flush, where only what promises durability fails.
@Suite struct FlushOutsideTheLockTests {
    static let locks = [true, false]

    func options(fileLock: Bool, scheduler: BackgroundScheduler = .afterDelay) -> Engine.Options {
        var options = Engine.Options()
        options.usesFileLock = fileLock
        options.flushScheduler = scheduler
        return options
    }

    /// D3: every `flock(2)` on the lock file, in every path that flushes (durable commits,
    /// `synchronize()`, background flushes, a compaction) and in catch-ups that find the page
    /// being changed (its stamp odd: a writer killed while publishing), is taken and released by
    /// a thread holding the engine's lock, which every commit holds from its lock to its unlock.
    @Test func theCommitLockIsTakenAndReleasedOnlyUnderTheEngineLock() throws {
        try withTemporaryDirectory { directory throws in
            let recording = RecordingFileSystem()
            let io = FileIO(fileSystem: recording)
            let flushes = ImmediateFlushes()
            let options = options(fileLock: true, scheduler: flushes.scheduler)
            let writer = openStore(directory, durability: .immediate, io: io, options: options)
            let other = openStore(directory, io: io, options: options)
            for index in 0..<20 {
                try writer.storeOrThrow(index, forKey: "key\(index % 4)")
                try other.storeOrThrow(index, forKey: "other\(index % 3)")
            }
            let page = try LockPage(in: directory)
            try page.write(try page.value(at: 72) | 1, at: 72)
            _ = other.integer(forKey: "key0")
            try writer.synchronize()
            try other.synchronize()
            try writer.compactNow()
            try other.storeOrThrow(99, forKey: "after")
            flushes.finish()

            let locks = recording.events.filter {
                if case .lockedLockFile = $0 { return true }
                return false
            }
            #expect(locks.count >= 40, "the commits took the lock file's flock")
            #expect(!locks.contains(.lockedLockFile(mode: .exclusive, holdingEngineLock: false)))
            #expect(!locks.contains(.lockedLockFile(mode: .unlocked, holdingEngineLock: false)))
            #expect(openStore(directory, options: options).integer(forKey: "after") == 99)
        }
    }

    /// D5: cuts of what an interrupted write left — a failed append's remains (Apple platforms'
    /// `pwrite` appends), a record half written by a process that died holding the lock, cut by
    /// the next commit of another store, and garbage found at the file's end by an open — are
    /// made under the lock with no flush, and flushed once it is let go, before any append after
    /// them. Nothing committed is lost; the failed commit is not there.
    @Test(arguments: locks)
    func aCutIsFlushedWithNoLockHeldBeforeAnythingIsAppendedAfterIt(fileLock: Bool) throws {
        try withTemporaryDirectory { directory throws in
            let recording = RecordingFileSystem()
            let faults = FaultSwitch()
            let io = FileIO(fileSystem: recording, injectFault: faults.io.injectFault)
            let options = options(fileLock: fileLock)
            let storage = openStore(directory, io: io, options: options)
            for index in 0..<5 { try storage.storeOrThrow(index, forKey: "key\(index)") }

            if fileLock {
                faults.inject(.shortWrite(bytes: 12, then: .noSpace), into: .write)
                #expect(throws: TinyStorageError.self) { try storage.storeOrThrow("lost", forKey: "failed") }
                faults.clear()
                try storage.storeOrThrow(5, forKey: "key5")
            }

            try storage.engine.holdCommitLock(leaving: .tornRecord) {}
            let other = openStore(directory, io: io, options: options)
            try other.storeOrThrow(6, forKey: "key6")

            try storage.synchronize()
            let handle = try FileHandle(forWritingTo: storage.fileURL)
            try handle.seekToEnd()
            try handle.write(contentsOf: Data([9, 0, 0, 0, 1, 2, 3]))
            try handle.close()
            let reopened = openStore(directory, io: io, options: options)
            try reopened.storeOrThrow(7, forKey: "key7")

            let events = recording.events
            #expect(!events.contains(.synced(holdingFileLock: true)), "a flush under the lock")
            var cutsAwaitingFlush = 0
            var cuts = 0
            for event in events {
                switch event {
                case .truncated(holdingFileLock: true):
                    cuts += 1
                    cutsAwaitingFlush += 1
                case .synced(holdingFileLock: false):
                    cutsAwaitingFlush = 0
                case .wrote(_, holdingFileLock: true), .wroteThroughMapping(_, holdingFileLock: true):
                    #expect(cutsAwaitingFlush == 0, "appended after a cut no flush had covered")
                default:
                    break
                }
            }
            if fileLock { #expect(cuts >= 3, "the failed append, the torn record and the garbage were cut") }
            let check = openStore(directory, options: options)
            for index in (fileLock ? 0 : 1)..<8 where fileLock || index != 5 {
                #expect(check.integer(forKey: "key\(index)") == index, "key\(index)")
            }
            #expect(check.integer(forKey: "key0") == 0)
            #expect(try check.retrieveOrThrow(type: String.self, forKey: "failed") == nil)
        }
    }

    /// D7: where the full flush is unsupported (`F_FULLFSYNC` answers `ENOTTY` on exFAT,
    /// `ENOTSUP` on SMB), a `.standard` store is created, written, compacted and repaired;
    /// `.immediate` commits and `synchronize()` throw `.io` saying why, and lose nothing.
    @Test(arguments: locks)
    func aStoreWorksWhereTheFullFlushIsUnsupported(fileLock: Bool) throws {
        try withTemporaryDirectory { directory throws in
            let faults = FaultSwitch()
            faults.inject(failing(.sync, Errno(ENOTTY)))
            let options = options(fileLock: fileLock)
            let storage = openStore(directory, io: faults.io, options: options)
            for index in 0..<20 { try storage.storeOrThrow(index, forKey: "key\(index % 5)") }
            try storage.compactNow()
            var bytes = try Data(contentsOf: storage.fileURL)
            bytes[bytes.count - 3] ^= 0x40
            try bytes.write(to: storage.fileURL)
            let repaired = openStore(directory, io: faults.io, options: options)
            #expect(!repaired.recoveryReports.isEmpty)
            try repaired.storeOrThrow(100, forKey: "after")

            let durable = openStore(directory, durability: .immediate, io: faults.io, options: options)
            do {
                try durable.storeOrThrow(364, forKey: "streak")
                Issue.record("an .immediate commit claimed durability")
            } catch let error as TinyStorageError {
                #expect(error.code == .io)
                #expect(error.description.contains("cannot flush to stable storage"), "\(error)")
            }
            #expect(throws: TinyStorageError.self) { try repaired.synchronize() }
            #expect(faults.count(.sync) > 0)

            faults.clear()
            try repaired.synchronize()
            let check = openStore(directory, options: options)
            #expect(check.integer(forKey: "streak") == 364, "written, only not flushed")
            #expect(check.integer(forKey: "after") == 100)
            #expect(check.integer(forKey: "key1") == 16)
        }
    }
}
