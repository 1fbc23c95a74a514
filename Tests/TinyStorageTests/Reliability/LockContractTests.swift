import Foundation
import Testing

@testable import TinyStorage

/// Issue 10, defects 4 and 5, as written contracts checked through the seams: the cross-process
/// lock is held for the commit itself only — never across a flush, a compaction's rewrite, a
/// repair, a logger call or a user's `update` closure — and no logger is ever called under any
/// lock, so a logger that uses the store cannot deadlock it.
@Suite struct LockContractTests {
    /// A logger that records whether a store lock was held at each call.
    final class WitnessLogger: TinyStorageLogging, @unchecked Sendable {
        // @unchecked: `calls` is only touched while holding `lock`.
        private let lock = NSLock()
        private var calls: [(message: String, locked: Bool)] = []

        func log(_ level: TinyStorageLogLevel, _ message: String, file: String, function: String, line: Int) {
            let locked = LockWitness.isHoldingAnyLock
            lock.lock()
            calls.append((message, locked))
            lock.unlock()
        }

        var underLock: [String] {
            lock.lock()
            defer { lock.unlock() }
            return calls.filter(\.locked).map(\.message)
        }

        var count: Int {
            lock.lock()
            defer { lock.unlock() }
            return calls.count
        }

        var messages: [String] {
            lock.lock()
            defer { lock.unlock() }
            return calls.map(\.message)
        }
    }

    /// Every path that logs: a new store adopting a plist, commits, a compaction, an interrupted
    /// write, a salvage, a store unavailable then available again, and value streams on a value
    /// that does not decode and on a value of an older shape (whose conversion, the user's
    /// closure, logs here so the logger sees where it runs).
    func exerciseEveryLoggingPath(in directory: URL, logger: WitnessLogger) async throws {
        let original = directory.appendingPathComponent("adopting")
        try FileManager.default.createDirectory(at: original, withIntermediateDirectories: true)
        try PropertyListSerialization.data(fromPropertyList: ["streak": Data("364".utf8)], format: .binary, options: 0)
            .write(to: original.appendingPathComponent("tiny-storage.plist"))
        let adopted = TinyStorage(insideDirectory: directory, name: "adopting", logger: logger)
        #expect(adopted.integer(forKey: "streak") == 364)

        let storage = TinyStorage(insideDirectory: directory, name: "store", durability: .immediate, logger: logger)
        for index in 0..<20 { try storage.storeOrThrow("value \(index)", forKey: "key\(index % 3)") }
        try storage.compactNow()
        storage.store(Double.nan, forKey: "bad")  // an encoding error, logged

        // Damage in the middle (a salvage) and garbage at the end (an interrupted write).
        let file = storage.fileURL
        var bytes = try Data(contentsOf: file)
        bytes[bytes.count / 2] ^= 0x40
        try (bytes + Data([9, 0, 0, 0, 1])).write(to: file)
        let repaired = TinyStorage(insideDirectory: directory, name: "store", logger: logger)
        _ = repaired.allKeys

        // Unavailable, then available again.
        let faults = FaultSwitch()
        faults.inject(failing(.open, .accessDenied, pathEndingIn: "/store.tinystorage"))
        let blocked = TinyStorage(
            insideDirectory: directory, name: "store", durability: .standard, io: faults.io, logger: logger)
        _ = blocked.retrieve(type: Int.self, forKey: "streak")
        faults.clear()
        _ = blocked.availability

        // Value streams whose first value, current when they open, does not decode (skipped,
        // logged) or is of an older shape (converted by the key's closure).
        let streamed = TinyStorage(insideDirectory: directory, name: "streams", logger: logger)
        try streamed.storeOrThrow("not a number", forKey: "count")
        try streamed.storeOrThrow(SettingsV1(name: "Ada", dark: true), forKey: "settings")
        let settings = TinyStorage.Key<SettingsV3>("settings", default: SettingsV3())
            .migrating(from: SettingsV1.self) { older in
                logger.log(.debug, Self.migrationClosureRan, file: #fileID, function: #function, line: #line)
                return SettingsV3(upgrading: SettingsV2(upgrading: older))
            }
        let counts = streamed.values(forKey: "count", as: Int.self)
        let upgraded = streamed.values(forKey: settings, as: SettingsV3.self)
        try streamed.storeOrThrow(3, forKey: "count")
        #expect(await collect(counts, count: 1) == [3], "the value that does not decode is skipped")
        #expect(await collect(upgraded, count: 1) == [SettingsV3(displayName: "Ada", theme: .dark)])
    }

    static let migrationClosureRan = "a key's migration closure ran"

    @Test func noLoggerIsCalledWhileAStoreLockIsHeld() async throws {
        try await withScratchDirectory { directory in
            let logger = WitnessLogger()
            try await exerciseEveryLoggingPath(in: directory, logger: logger)
            #expect(logger.count >= 5, "the paths above log (adoption, encoding, salvage, recovery…)")
            #expect(logger.messages.contains(Self.migrationClosureRan))
            #expect(logger.messages.contains { $0.contains("count") && $0.contains("decod") }, "\(logger.messages)")
            #expect(logger.underLock.isEmpty, "logged under a lock: \(logger.underLock)")
        }
    }

    /// A logger that reads and writes the store it logs for: under a lock that deadlocks (Linux)
    /// or traps (`os_unfair_lock` on Apple platforms).
    final class ReentrantLogger: TinyStorageLogging, @unchecked Sendable {
        // @unchecked: `storage` is set once, before the store is used, and only read afterwards.
        var storage: TinyStorage?
        private let lock = NSLock()
        private var reentered = 0

        func log(_ level: TinyStorageLogLevel, _ message: String, file: String, function: String, line: Int) {
            guard let storage else { return }
            lock.lock()
            let first = reentered == 0
            reentered += 1
            lock.unlock()
            guard first else { return }
            _ = storage.retrieve(type: Int.self, forKey: "streak")
            storage.store(1, forKey: "loggerWasHere")
        }

        var reentries: Int {
            lock.lock()
            defer { lock.unlock() }
            return reentered
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aLoggerThatUsesTheStoreDoesNotDeadlockIt() throws {
        try withTemporaryDirectory { directory throws in
            let logger = ReentrantLogger()
            let storage = TinyStorage(insideDirectory: directory, name: "store", durability: .immediate, logger: logger)
            logger.storage = storage
            try storage.storeOrThrow(364, forKey: "streak")
            try storage.compactNow()  // logs at debug level
            storage.store(Double.infinity, forKey: "bad")  // logs an error
            #expect(logger.reentries >= 1)
            #expect(storage.integer(forKey: "loggerWasHere") == 1)
        }
    }

    /// A value whose decoding reads the store it came from, and records whether a lock was held.
    struct StoreReadingValue: Decodable, Sendable {
        /// The store the decoding reads, and what each decoding saw.
        static let witness = Locked<(storage: TinyStorage?, heldLock: [Bool])>((nil, []))
        let value: Int

        init(from decoder: any Decoder) throws {
            value = try decoder.singleValueContainer().decode(Int.self)
            let storage = Self.witness.withLock { witness in
                witness.heldLock.append(LockWitness.isHoldingAnyLock)
                return witness.storage
            }
            // Under the store's lock this deadlocks (Linux) or traps (`os_unfair_lock`).
            _ = storage?.integer(forKey: "other")
        }
    }

    /// Issue 28, D4: a value stream decodes (the type's own code) and logs a value that does not
    /// decode under no lock, the first value included.
    @Test(.timeLimit(.minutes(1)))
    func aValueStreamDecodesAndLogsUnderNoLock() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("TinyStorageTests-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let logger = WitnessLogger()
        let storage = TinyStorage(insideDirectory: directory, name: "store", logger: logger)
        StoreReadingValue.witness.withLock { $0.storage = storage }
        defer { StoreReadingValue.witness.withLock { $0.storage = nil } }
        try storage.storeOrThrow(1, forKey: "streak")
        var values = storage.values(forKey: "streak", as: StoreReadingValue.self).makeAsyncIterator()
        #expect(await values.next()??.value == 1)
        try storage.storeOrThrow("not a number", forKey: "streak")
        try storage.storeOrThrow(2, forKey: "streak")
        #expect(await values.next()??.value == 2, "the value that does not decode is skipped")
        #expect(StoreReadingValue.witness.withLock { $0.heldLock } == [false, false])
        #expect(logger.count >= 1, "the value that does not decode is logged")
        #expect(logger.underLock.isEmpty, "logged under a lock: \(logger.underLock)")
    }

    @Test func anUpdateClosureRunsWithNoLockAndMayUseTheStore() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow(1, forKey: "counter")
            let result = try storage.update("counter", as: Int.self) { value -> Bool in
                // Reading the store here would deadlock if the closure ran under its lock.
                #expect(storage.integer(forKey: "counter") == value)
                value = (value ?? 0) + 1
                return LockWitness.isHoldingAnyLock
            }
            #expect(result == false, "the closure ran under a lock")
            #expect(storage.integer(forKey: "counter") == 2)
        }
    }

    /// The closure runs without the lock, so another writer may change the key meanwhile: its
    /// result is then not committed, and it runs again on the new value. No update is lost.
    @Test func anUpdateWhoseKeyChangedMeanwhileRunsAgainOnTheNewValue() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let other = openStore(directory)
            try storage.storeOrThrow(10, forKey: "counter")
            var seen: [Int?] = []
            try storage.update("counter", as: Int.self) { value in
                seen.append(value)
                if seen.count == 1 { try other.storeOrThrow(100, forKey: "counter") }  // a racing writer
                value = (value ?? 0) + 1
            }
            #expect(seen == [10, 100])
            #expect(storage.integer(forKey: "counter") == 101)
            #expect(other.integer(forKey: "counter") == 101)
        }
    }

    /// Through the file-system seam: with the cross-process lock held, the only writes are
    /// commit records (and, in a compaction, the commits made since its snapshot) or, on Linux,
    /// space allocated ahead of them, one step at a time (see `AppendMapping`), and there is no
    /// flush at all — durable commits, compactions, repairs, quarantine copies and the cuts of an
    /// interrupted write (garbage found at the end by an open, a record a holder left half
    /// written, cut by the next commit) flush with no lock held.
    ///
    /// The lock watched is the cross-process one, the lock this contract is about (an app
    /// suspended holding it in a shared container is killed); the engine's in-process lock is
    /// held across a cut's flush, which keeps this process from appending after the cut first.
    /// A rewrite is told from a commit by its size: every commit here is under 64 KiB, every
    /// rewrite of the whole log over it.
    @Test func noFlushOrRewriteHappensWhileTheFileLockIsHeld() throws {
        try withTemporaryDirectory { directory throws in
            let fileSystem = RecordingFileSystem()
            let io = FileIO(fileSystem: fileSystem)
            let storage = openStore(directory, durability: .immediate, io: io)
            let big = String(repeating: "x", count: 40_000)
            for index in 0..<40 { try storage.storeOrThrow("\(big)\(index)", forKey: "key\(index % 4)") }
            try storage.compactNow()
            try storage.update("counter", as: Int.self) { $0 = ($0 ?? 0) + 1 }
            var bytes = try Data(contentsOf: storage.fileURL)
            bytes[bytes.count / 2] ^= 0x40
            try bytes.write(to: storage.fileURL)
            let repaired = openStore(directory, durability: .immediate, io: io)
            try repaired.storeOrThrow(1, forKey: "after")
            // Garbage where the next record goes (the remains of an append), cut by an open; a
            // record a holder left half written, cut by the next commit.
            let handle = try FileHandle(forWritingTo: storage.fileURL)
            try handle.seek(toOffset: UInt64(repaired.engine.state.withLock { $0.log.end }))
            try handle.write(contentsOf: Data([9, 0, 0, 0, 1, 2, 3]))
            try handle.close()
            // NB: cut by this open, or by a later look of an instance already open: either way
            // set aside once, which the quarantine count below checks.
            let reopened = openStore(directory, durability: .immediate, io: io)
            try reopened.engine.holdCommitLock(leaving: .tornRecord) {}
            let cutting = openStore(directory, durability: .immediate, io: io)
            try cutting.storeOrThrow(2, forKey: "after")
            #expect(openStore(directory).integer(forKey: "after") == 2)
            let setAside = quarantineFiles(of: cutting).filter { $0.lastPathComponent.hasPrefix("interrupted-write") }
            #expect(setAside.count == 2, "both interrupted writes were cut: \(setAside)")

            let events = fileSystem.events
            #expect(events.contains(.synced(holdingFileLock: false)))
            #expect(!events.contains(.synced(holdingFileLock: true)), "a flush under the file lock")
            let lockedWrites = events.compactMap { event -> Int? in
                guard case .wrote(let count, true) = event else { return nil }
                return count
            }
            let lockedAllocations = events.compactMap { event -> Int? in
                guard case .allocated(let count, true) = event else { return nil }
                return count
            }
            #expect(!lockedWrites.isEmpty || !lockedAllocations.isEmpty, "no commit was recorded")
            #expect(lockedAllocations.allSatisfy { $0 <= AppendMapping.maximumAhead + AppendMapping.granularity })
            #expect(
                lockedWrites.allSatisfy { $0 < 64 << 10 },
                "a large write under the file lock: \(lockedWrites.max() ?? 0)")
        }
    }
}
