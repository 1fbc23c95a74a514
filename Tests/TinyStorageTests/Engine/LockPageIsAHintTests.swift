import Foundation
import Testing

@testable import TinyStorage

/// Issue 27, at every place that reads `store.lock`'s page: the page is a hint, the data file the
/// only truth. Each test makes the page disagree with the file as another program (a restore, a
/// disk that lost its cache, a script) would, by writing over it, and shows that no record that
/// verifies is hidden or overwritten. Every test runs with both commit locks: the mutex in the
/// page with appends through a mapping (Linux), and `flock` with `pwrite` (Apple platforms).
@Suite struct LockPageIsAHintTests {
    static let locks = [false, true]

    /// A store of `count` commits, `key0` … `key<count-1>`, and the log's end after each.
    func storeKeys(_ count: Int, in storage: TinyStorage) throws -> [Int] {
        var ends: [Int] = []
        for index in 0..<count {
            try storage.storeOrThrow("v\(index)", forKey: "key\(index)")
            ends.append(try committedLength(storage.fileURL))
        }
        return ends
    }

    /// Waits until no instance in this process has the store in `directory` open, so the next
    /// open is alone with it. An instance holds a shared `flock` on the store's folder until its
    /// engine is gone, and a thread still finishing work for a store just let go of (a look of
    /// its file watch) can keep the engine a moment longer: under ThreadSanitizer, long enough
    /// for the next open to find it there. A wait for that condition, with a deadline that only
    /// turns a hang into a failure.
    func waitUntilNoInstanceHasTheStoreOpen(_ directory: URL, name: String = "store") throws {
        let fd = open(directory.appendingPathComponent(name).path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        try #require(fd >= 0, "the store's folder does not open")
        defer { close(fd) }
        let deadline = DispatchTime.now() + .seconds(60)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            try #require(DispatchTime.now() < deadline, "an instance kept the store open")
            sched_yield()
        }
        flock(fd, LOCK_UN)
    }

    /// Expects a new instance to read `key0` … `key<count-1>`, then a commit, then every record
    /// of the file to verify, that commit included.
    func expectIntact(_ directory: URL, keys count: Int, options: Engine.Options) throws {
        let reader = openStore(directory, options: options)
        for index in 0..<count {
            #expect(try reader.retrieveOrThrow(type: String.self, forKey: "key\(index)") == "v\(index)", "key\(index)")
        }
        try reader.storeOrThrow("after", forKey: "new")
        let inspection = try TinyStorage.inspect(storeDirectory: reader.directoryURL)
        #expect(inspection.isHealthy, "\(inspection.damagedRanges)")
        #expect(inspection.entries.count == count + 1)
        #expect(try openStore(directory, options: options).retrieveOrThrow(type: String.self, forKey: "new") == "after")
    }

    func options(fileLock: Bool) -> Engine.Options {
        var options = Engine.Options()
        options.usesFileLock = fileLock
        return options
    }

    @Test(arguments: locks)
    func aPageBehindTheFileHidesNothingFromAnOpen(fileLock: Bool) throws {
        try withTemporaryDirectory { directory throws in
            let options = options(fileLock: fileLock)
            let ends = try storeKeys(10, in: openStore(directory, options: options))
            try LockPage(in: directory).overwrite(length: ends[4])
            try expectIntact(directory, keys: 10, options: options)
        }
    }

    /// A record appended and never published (its writer killed between the two) leaves the
    /// page behind, and processes that took the page for current did not look: the open that
    /// reads the record brings the page up to it, so they read it too (on main before, a
    /// long-lived store kept answering the older value while a fresh one answered the newer).
    @Test(arguments: locks)
    func anOpenThatFindsThePageBehindBringsItUpToTheFile(fileLock: Bool) throws {
        try withTemporaryDirectory { directory throws in
            let options = options(fileLock: fileLock)
            // NB: no watch, so it looks only when a read finds the page's counter moved.
            var unwatched = options
            unwatched.watchesChanges = false
            let longLived = openStore(directory, options: unwatched)
            try longLived.storeOrThrow("old", forKey: "key")
            let page = try LockPage(in: directory)
            let (length, sequence) = (try page.value(at: 16), try page.value(at: 24))
            try openStore(directory, options: options).storeOrThrow("new", forKey: "key")
            // The page as the killed writer left it: its append done, its publish not.
            try page.write(length, at: 16)
            try page.write(sequence, at: 24)
            #expect(try longLived.retrieveOrThrow(type: String.self, forKey: "key") == "old", "nothing said to look")

            #expect(
                try openStore(directory, options: options).retrieveOrThrow(type: String.self, forKey: "key") == "new")
            #expect(try longLived.retrieveOrThrow(type: String.self, forKey: "key") == "new")
            #expect(try page.value(at: 16) > length)
        }
    }

    @Test(arguments: locks)
    func aPageBehindTheFileHidesNothingFromACatchUp(fileLock: Bool) throws {
        try withTemporaryDirectory { directory throws in
            let options = options(fileLock: fileLock)
            let writer = openStore(directory, options: options)
            let reader = openStore(directory, options: options)
            let ends = try storeKeys(5, in: writer)
            #expect(try reader.retrieveOrThrow(type: String.self, forKey: "key4") == "v4")
            for index in 5..<10 { try writer.storeOrThrow("v\(index)", forKey: "key\(index)") }
            try LockPage(in: directory).overwrite(length: ends[4])
            // NB: the reader catches up from where it was, which is where the page now ends.
            #expect(try reader.retrieveOrThrow(type: String.self, forKey: "key9") == "v9")
            try reader.storeOrThrow("v5 again", forKey: "key5")
            #expect(try writer.retrieveOrThrow(type: String.self, forKey: "key9") == "v9")
            #expect(try writer.retrieveOrThrow(type: String.self, forKey: "key5") == "v5 again")
            try reader.storeOrThrow("v5", forKey: "key5")
            try expectIntact(directory, keys: 10, options: options)
        }
    }

    /// Under the commit lock, where a commit catches up with what raced in, the page's length is
    /// checked against the file too: the next append lands after every record that verifies.
    @Test(arguments: locks)
    func aPageBehindTheFileHidesNothingFromACatchUpUnderTheLock(fileLock: Bool) throws {
        try withTemporaryDirectory { directory throws in
            // NB: no watch, which could catch the reader up before the catch-up under the lock.
            var options = options(fileLock: fileLock)
            options.watchesChanges = false
            let writer = openStore(directory, options: options)
            let reader = openStore(directory, options: options)
            let ends = try storeKeys(5, in: writer)
            #expect(try reader.retrieveOrThrow(type: String.self, forKey: "key4") == "v4")
            for index in 5..<10 { try writer.storeOrThrow("v\(index)", forKey: "key\(index)") }
            try LockPage(in: directory).overwrite(length: ends[4])
            let engine = reader.engine
            let end = try engine.withState { (state) throws(TinyStorageError) in
                try engine.withFileLock(&state) { (state) throws(TinyStorageError) -> Int? in
                    try engine.catchUpUnderLock(&state) ? state.log.end : nil
                }
            }
            #expect(end == (try committedLength(writer.fileURL)))
            try expectIntact(directory, keys: 10, options: options)
        }
    }

    /// A compaction takes its snapshot after catching up, and swaps under the lock after catching
    /// up again: with the page behind, what it rewrites still holds every record.
    @Test(arguments: locks)
    func aPageBehindTheFileLosesNothingInACompaction(fileLock: Bool) throws {
        try withTemporaryDirectory { directory throws in
            let options = options(fileLock: fileLock)
            let writer = openStore(directory, options: options)
            let compacting = openStore(directory, options: options)
            let ends = try storeKeys(5, in: writer)
            #expect(try compacting.retrieveOrThrow(type: String.self, forKey: "key4") == "v4")
            for index in 5..<10 { try writer.storeOrThrow("v\(index)", forKey: "key\(index)") }
            try LockPage(in: directory).overwrite(length: ends[4])
            try compacting.compactNow()
            #expect(try headerGeneration(writer.fileURL) == 2, "compacted")
            try expectIntact(directory, keys: 10, options: options)
        }
    }

    /// The page's generation differing from the file's even under the lock (copies taken on
    /// either side of a compaction) is not taken for a file being replaced forever: the file is
    /// checked from its start and read.
    @Test(arguments: locks)
    func aPageOfAnotherGenerationHidesNothing(fileLock: Bool) throws {
        try withTemporaryDirectory { directory throws in
            let options = options(fileLock: fileLock)
            let ends = try storeKeys(10, in: openStore(directory, options: options))
            try LockPage(in: directory).overwrite(generation: 7, length: ends[9])
            try expectIntact(directory, keys: 10, options: options)
        }
    }

    /// A page claiming more than the file holds makes no flush claim more: a flush reaches, and
    /// records as durable, what the process verified, so each later `.immediate` commit is still
    /// flushed, and the durable mark never passes the log's end (a later open would take the
    /// rest for lost data).
    @Test(arguments: locks)
    func aPageAheadOfTheFileMakesNoFlushClaimMore(fileLock: Bool) throws {
        try withTemporaryDirectory { directory throws in
            var options = options(fileLock: fileLock)
            let flushes = ManualFlushes()
            options.flushScheduler = flushes.scheduler
            let syncs = Locked(0)
            let io = FileIO { call, _ in
                if call == .sync { syncs.withLock { $0 += 1 } }
                return nil
            }
            let durable = openStore(directory, durability: .immediate, io: io, options: options)
            let standard = openStore(directory, options: options)
            _ = try storeKeys(5, in: durable)
            try standard.storeOrThrow("v5", forKey: "key5")
            // NB: between a commit's publish and the flushes that read how far to reach.
            try LockPage(in: directory).overwrite(length: 1 << 30, bumpingSequence: false)
            flushes.runAll()
            try durable.synchronize()
            func durableMark() throws -> Int {
                try Data(contentsOf: durable.fileURL).withUnsafeBytes { LogHeader.durableMark(in: $0) }
            }
            #expect(try durableMark() <= (try committedLength(durable.fileURL)), "no more than the log")
            for index in 6..<9 {
                let before = syncs.withLock { $0 }
                try durable.storeOrThrow("v\(index)", forKey: "key\(index)")
                #expect(syncs.withLock { $0 } > before, "key\(index) was flushed")
            }
            try standard.storeOrThrow("v9", forKey: "key9")
            try LockPage(in: directory).overwrite(length: 1 << 30, bumpingSequence: false)
            flushes.runAll()
            #expect(try durableMark() <= (try committedLength(durable.fileURL)), "no more than the log")
            try expectIntact(directory, keys: 10, options: options)
        }
    }

    /// A page claiming more than the file holds (the file cut short by another program, or put
    /// back from an older copy) is not evidence of damage: what the file holds is read, nothing
    /// throws, and the log says what the page claimed. Only the file's own durable mark makes
    /// missing data a loss to report.
    @Test(arguments: locks)
    func aPageAheadOfTheFileIsLoggedNotTakenForDamage(fileLock: Bool) throws {
        try withTemporaryDirectory { directory throws in
            var options = options(fileLock: fileLock)
            options.backgroundFlushes = false
            let storage = openStore(directory, options: options)
            let ends = try storeKeys(10, in: storage)
            try truncateFile(storage.fileURL, to: ends[4])
            let logger = TestLogger()
            let reader = openStore(directory, logger: logger, options: options)
            for index in 0..<5 {
                #expect(try reader.retrieveOrThrow(type: String.self, forKey: "key\(index)") == "v\(index)")
            }
            #expect(try reader.retrieveOrThrow(type: String.self, forKey: "key5") == nil)
            #expect(reader.recoveryReports.allSatisfy { !$0.isDataLoss })
            #expect(logger.texts(atLeast: .warning).contains { $0.contains("store.lock said") })
            try expectIntact(directory, keys: 5, options: options)
        }
    }

    // MARK: The lock file itself

    /// `store.lock` removed, or replaced by a copy, while a process has the store open: that
    /// process goes on with the file it opened, so another one refuses to open the store rather
    /// than commit under another lock; once the first has closed it, the store opens.
    @Test(arguments: locks, [true, false])
    func aLockFileReplacedUnderAnOpenStoreIsRefusedUntilItCloses(fileLock: Bool, copyBack: Bool) throws {
        try withTemporaryDirectory { directory throws in
            let options = options(fileLock: fileLock)
            var first: TinyStorage? = openStore(directory, options: options)
            try first?.storeOrThrow(1, forKey: "count")
            let lockFile = directory.appendingPathComponent("store/store.lock")
            let aside = directory.appendingPathComponent("aside.lock")
            try FileManager.default.moveItem(at: lockFile, to: aside)
            if copyBack { try FileManager.default.copyItem(at: aside, to: lockFile) }

            let second = openStore(directory, options: options)
            let refusal = try #require(unavailabilityError(second))
            #expect(refusal.message.contains("was removed or replaced while another process had the store open"))
            expectError(.unavailable) { try second.storeOrThrow(2, forKey: "count") }
            try first?.storeOrThrow(3, forKey: "count")
            first = nil
            #expect(try second.retrieveOrThrow(type: Int.self, forKey: "count") == 3)
            try second.storeOrThrow(4, forKey: "count")
            #expect(try openStore(directory, options: options).retrieveOrThrow(type: Int.self, forKey: "count") == 4)
        }
    }

    /// A lock file copied from another store (or from this one, earlier) where nobody has the
    /// store open names another file: it is taken over, its page forgotten, its mutex made again.
    @Test(arguments: locks)
    func aLockFileCopiedFromAnotherStoreIsTakenOver(fileLock: Bool) throws {
        try withTemporaryDirectory { directory throws in
            let options = options(fileLock: fileLock)
            let other = openStore(directory, name: "other", options: options)
            for index in 0..<30 { try other.storeOrThrow(index, forKey: "other\(index)") }
            let ends = try storeKeys(10, in: openStore(directory, options: options))
            try waitUntilNoInstanceHasTheStoreOpen(directory)
            #expect(ends.last ?? 0 < (try committedLength(other.fileURL)))
            let lockFile = directory.appendingPathComponent("store/store.lock")
            try FileManager.default.removeItem(at: lockFile)
            try FileManager.default.copyItem(at: directory.appendingPathComponent("other/store.lock"), to: lockFile)
            try expectIntact(directory, keys: 10, options: options)
            #expect(try other.retrieveOrThrow(type: Int.self, forKey: "other29") == 29)
        }
    }

    /// The page put back in place from a copy under two running processes, after one of them
    /// committed: to the other, the page says nothing was committed since its last look. On main
    /// before, its next commit trusted that and appended at its own end, over the first one's
    /// record, an acknowledged commit lost (found by the simulation); now the data file, not the
    /// page, says whether anything lies there.
    @Test(arguments: locks)
    func aPagePutBackUnderRunningProcessesLetsNoCommitLandOnAnother(fileLock: Bool) throws {
        try withTemporaryDirectory { directory throws in
            var options = options(fileLock: fileLock)
            options.watchesChanges = false
            let first = openStore(directory, options: options)
            let second = openStore(directory, options: options)
            try first.storeOrThrow("v0", forKey: "key0")
            #expect(try second.retrieveOrThrow(type: String.self, forKey: "key0") == "v0")
            let page = try LockPage(in: directory)
            let copy = try page.read(offset: 0, count: 4096)
            try first.storeOrThrow("v1", forKey: "key1")
            try page.write(copy, at: 0)
            try second.storeOrThrow("v2", forKey: "key2")
            try expectIntact(directory, keys: 3, options: options)
        }
    }

    /// A page written over with a length past any memory, read while the data file's size cannot
    /// be (`fstat` failing): the catch-up refuses (`.unavailable`) instead of allocating what the
    /// page claims. On main before, the process died on the allocation (found by the simulation,
    /// where a killed process's calls all fail).
    @Test(arguments: locks)
    func aPageLengthPastAnyMemoryIsNotReadWhenTheFileSizeCannotBe(fileLock: Bool) throws {
        try withTemporaryDirectory { directory throws in
            var options = options(fileLock: fileLock)
            options.watchesChanges = false
            let failingStat = Locked(false)
            let io = FileIO { call, path in
                call == .stat && path == nil && failingStat.withLock { $0 } ? .fail(.ioError) : nil
            }
            let reader = openStore(directory, io: io, options: options)
            try reader.storeOrThrow("v0", forKey: "key0")
            let page = try LockPage(in: directory)
            try page.write(UInt64(Int.max - 4096), at: 16)
            try page.write(try page.value(at: 24) + 1, at: 24)
            failingStat.withLock { $0 = true }
            #expect(throws: TinyStorageError.self) { try reader.retrieveOrThrow(type: String.self, forKey: "key0") }
            failingStat.withLock { $0 = false }
            #expect(try reader.retrieveOrThrow(type: String.self, forKey: "key0") == "v0")
        }
    }

    /// The page's count of cuts a flush covered, written over with a count ahead of its count of
    /// cuts (no process writes that): a cut seems to await a flush, and the flush that follows
    /// must settle it. On main before, the flush never recorded it ("only forward"), so every
    /// commit let go of the lock to flush, and took it again, forever (found by the simulation).
    @Test(.timeLimit(.minutes(1)), arguments: locks)
    func aCountOfFlushedCutsAheadOfTheCutsIsSettledByOneFlush(fileLock: Bool) throws {
        try withTemporaryDirectory { directory throws in
            let options = options(fileLock: fileLock)
            _ = try storeKeys(2, in: openStore(directory, options: options))
            let page = try LockPage(in: directory)
            try page.write(try page.value(at: 288) &+ 1_000, at: 296)
            let storage = openStore(directory, options: options)
            try storage.storeOrThrow("v2", forKey: "key2")
            #expect(try page.value(at: 296) == (try page.value(at: 288)), "the flush settled the counts")
            try expectIntact(directory, keys: 3, options: options)
        }
    }

    /// A page brought back with its mutex held by a thread that is not holding it (a disk that
    /// lost its cache, a copy put back in place): the first process to open the store alone
    /// makes the mutex again instead of waiting forever.
    @Test(.enabled(if: isLinux, "the mutex in the page is Linux's commit lock"))
    func aMutexThePageSaysIsHeldIsMadeAgainByTheFirstOpener() throws {
        try withTemporaryDirectory { directory throws in
            _ = try storeKeys(3, in: openStore(directory))
            try waitUntilNoInstanceHasTheStoreOpen(directory)
            let page = try LockPage(in: directory)
            // NB: the mutex's lock word says thread 1 (init's) holds it, which it never did.
            try page.write(UInt64(1), at: SharedMutexCommitLock.mutexOffset)
            let opened = openStore(directory)
            #expect(try opened.retrieveOrThrow(type: String.self, forKey: "key2") == "v2")
            // NB: checked before anything takes the lock, which would otherwise wait forever.
            try #require(try page.value(at: SharedMutexCommitLock.mutexOffset) & 0xFFFF_FFFF == 0, "made again")
            try expectIntact(directory, keys: 3, options: Engine.Options())
        }
    }

    // MARK: Temporary files

    /// A compaction's temporary file left by a process that is gone is removed by the next open,
    /// also when its name's process ID belongs to a running process now (this one): nobody holds
    /// the lock its writer takes. One still being written (its lock held), or empty, is kept. The
    /// open lists the folder only when the lock page says a temporary file was made.
    @Test func abandonedTemporaryFilesAreRemovedWhateverTheirProcessID() throws {
        try withTemporaryDirectory { directory throws in
            _ = try storeKeys(3, in: openStore(directory))
            let folder = directory.appendingPathComponent("store")
            func temporary(_ suffix: String) -> URL {
                folder.appendingPathComponent(".store.tinystorage.\(getpid())-\(suffix)\(StoreFolder.temporarySuffix)")
            }
            try Data(repeating: 7, count: 4096).write(to: temporary("000000000000dead"))
            try Data().write(to: temporary("00000000000e3e3e"))
            try Data(repeating: 7, count: 4096).write(to: temporary("0000000000001ive"))
            let writing = try FileHandle(forUpdating: temporary("0000000000001ive"))
            defer { try? writing.close() }
            #expect(flock(writing.fileDescriptor, LOCK_EX | LOCK_NB) == 0)
            // NB: as their writers left the page: noting that temporary files were made.
            try LockPage(in: directory).write(UInt64(1), at: 280)

            try expectIntact(directory, keys: 3, options: Engine.Options())
            let left = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasPrefix(".") }
            #expect(
                left.sorted()
                    == [temporary("0000000000001ive"), temporary("00000000000e3e3e")].map(\.lastPathComponent))
        }
    }
}

/// `store.lock` as another program sees it: a file it can write over.
struct LockPage {
    let url: URL

    init(in directory: URL, name: String = "store") throws {
        url = directory.appendingPathComponent(name).appendingPathComponent(StoreLocation.lockFileName)
    }

    func read(offset: Int, count: Int) throws -> [UInt8] {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(offset))
        return [UInt8](try handle.read(upToCount: count) ?? Data())
    }

    func write(_ bytes: [UInt8], at offset: Int) throws {
        let handle = try FileHandle(forUpdating: url)
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(offset))
        try handle.write(contentsOf: Data(bytes))
    }

    func value(at offset: Int) throws -> UInt64 {
        try read(offset: offset, count: 8).withUnsafeBytes { $0.loadLittleEndian(UInt64.self, at: 0) }
    }

    func write(_ value: UInt64, at offset: Int) throws {
        try write(withUnsafeBytes(of: value.littleEndian) { Array($0) }, at: offset)
    }

    /// Writes a generation and a length over the page's, and moves its commit counter on so
    /// every process looks (unless told not to), as a program putting back an older copy would.
    func overwrite(generation: UInt64? = nil, length: Int, bumpingSequence: Bool = true) throws {
        if let generation { try write(generation, at: 8) }
        try write(UInt64(length), at: 16)
        if bumpingSequence { try write(try value(at: 24) + 1, at: 24) }
    }
}
