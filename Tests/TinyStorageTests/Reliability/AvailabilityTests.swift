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

extension TinyStorage.Key where Value == Int {
    fileprivate static var availabilityStreak: Self { .init("streak", default: 0) }
}

private enum AvailabilityGroup: String, TinyStorageKeyGroup {
    case streak
}

/// G1: a store that cannot read its file says so, precisely, and never looks empty; a store that
/// does not exist yet is new and empty. `waitUntilAvailable` waits, times out and is cancellable.
@Suite struct AvailabilityTests {
    /// An existing store whose data file cannot be opened.
    func unreadableStore(in directory: URL, logger: TestLogger = TestLogger()) throws -> (TinyStorage, FaultSwitch) {
        try makeStore(in: directory, values: streakValues)
        let faults = FaultSwitch()
        faults.inject(failing(.open, .accessDenied, pathEndingIn: "/store.tinystorage"))
        return (openStore(directory, io: faults.io, logger: logger), faults)
    }

    @Test func aStoreThatCannotBeReadIsUnavailableNeverEmpty() throws {
        try withTemporaryDirectory { directory throws in
            let logger = TestLogger()
            let (storage, _) = try unreadableStore(in: directory, logger: logger)
            let before = try snapshot(of: directory)

            // Every way of asking either throws `.unavailable` or gives the documented fallback.
            expectError(.unavailable) { try storage.retrieveOrThrow(type: Int.self, forKey: "streak") }
            expectError(.unavailable) { try storage.retrieveOrThrow(type: String.self, forKey: "absent") }
            expectError(.unavailable) { try storage.value(for: .availabilityStreak) }
            expectError(.unavailable) {
                try storage.group(AvailabilityGroup.self).retrieveOrThrow(type: Int.self, forKey: .streak)
            }
            expectError(.unavailable) { try storage.rawJSON() }
            #expect(storage.retrieve(type: Int.self, forKey: "streak") == nil)
            #expect(!storage.contains("streak"))
            #expect(!storage.contains(.availabilityStreak))
            #expect(storage.allKeys.isEmpty)
            #expect(storage.group(AvailabilityGroup.self).storedKeys.isEmpty)
            #expect(storage.integer(forKey: "streak") == 0)
            #expect(!storage.bool(forKey: "onboarded"))
            #expect(storage.recoveryReports.isEmpty)
            // …and the reason was logged, so "empty" answers above are never silent.
            #expect(logger.texts(atLeast: .error).contains { $0.contains("unavailable") && $0.contains("open") })
            #expect(try snapshot(of: directory) == before)
        }
    }

    @Test func aMissingStoreDirectoryIsANewEmptyAvailableStore() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory.appendingPathComponent("not/yet/there", isDirectory: true))
            #expect(storage.availability.isAvailable)
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == nil)
            #expect(try storage.rawJSON().isEmpty)
            #expect(storage.recoveryReports.isEmpty)
            try storage.storeOrThrow(1, forKey: "streak")
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 1)
        }
    }

    @Test func anEmptyStoreDirectoryIsANewEmptyAvailableStore() throws {
        try withTemporaryDirectory { directory throws in
            try FileManager.default.createDirectory(
                at: directory.appendingPathComponent("store"), withIntermediateDirectories: false)
            let storage = openStore(directory)
            #expect(storage.availability.isAvailable)
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == nil)
            #expect(try headerGeneration(storage.fileURL) >= 1)
        }
    }

    @Test func aDirectoryWhereTheDataFileShouldBeIsUnavailableAndLeftAlone() throws {
        try withTemporaryDirectory { directory throws in
            let dataFile = directory.appendingPathComponent("store/store.tinystorage", isDirectory: true)
            try FileManager.default.createDirectory(at: dataFile, withIntermediateDirectories: true)
            try Data("keep".utf8).write(to: dataFile.appendingPathComponent("inside"))
            let before = try snapshot(of: directory)

            let storage = openStore(directory)
            let reason = try #require(unavailabilityError(storage))
            #expect(reason.code == .unsafeFile, "\(reason)")
            #expect(reason.message.contains("store.tinystorage' is a directory"), "\(reason)")
            expectError(.unavailable) { try storage.retrieveOrThrow(type: Int.self, forKey: "streak") }
            expectError(.unavailable) { try storage.storeOrThrow(1, forKey: "streak") }
            expectError(.unavailable) { try storage.resetOrThrow() }
            #expect(try snapshot(of: directory).filter { $0.key != "store/store.lock" } == before)
        }
    }

    @Test func aFifoWhereTheDataFileShouldBeIsUnavailableAndLeftAlone() throws {
        try withTemporaryDirectory { directory throws in
            let folder = directory.appendingPathComponent("store", isDirectory: true)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
            let fifo = folder.appendingPathComponent("store.tinystorage")
            try #require(mkfifo(fifo.path, 0o600) == 0)

            let storage = openStore(directory)
            let reason = try #require(unavailabilityError(storage))
            #expect(reason.code == .unsafeFile, "\(reason)")
            #expect(reason.message.contains("store.tinystorage' is a FIFO"), "\(reason)")
            expectError(.unavailable) { try storage.retrieveOrThrow(type: Int.self, forKey: "streak") }
            expectError(.unavailable) { try storage.storeOrThrow(1, forKey: "streak") }
            var info = stat()
            #expect(stat(fifo.path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFIFO)
        }
    }

    /// A newer format is not damage: even when records that look verifiable follow its header, it
    /// is neither salvaged nor quarantined, and the reason says to update the library.
    @Test func aNewerFormatIsUnsupportedAndNeverSalvaged() throws {
        try withTemporaryDirectory { directory throws in
            let fileURL = try makeStore(in: directory, values: streakValues)
            var bytes = try Data(contentsOf: fileURL)
            let newer = LogHeader(version: LogFormat.newestVersion + 1, generation: 7).encoded()
            bytes.replaceSubrange(0..<LogFormat.headerSize, with: newer)
            try bytes.write(to: fileURL)
            let before = try snapshot(of: directory)

            let storage = openStore(directory)
            let reason = try #require(unavailabilityError(storage))
            #expect(reason.code == .unsupportedFormat, "\(reason)")
            expectError(.unavailable) { try storage.retrieveOrThrow(type: Int.self, forKey: "streak") }
            expectError(.unavailable) { try storage.storeOrThrow(1, forKey: "streak") }
            storage.store(1, forKey: "streak")
            #expect(storage.recoveryReports.isEmpty)
            #expect(quarantineFiles(of: storage).isEmpty)
            #expect(try snapshot(of: directory) == before)
        }
    }

    // MARK: waitUntilAvailable

    @Test func waitingOnAnAvailableStoreReturnsAtOnce() async throws {
        let clock = VirtualClock()
        let storage = TinyStorage.inMemory(logger: TestLogger())
        try await storage.waitUntilAvailable(timeout: .seconds(1), pollInterval: .milliseconds(1), clock: clock)
        #expect(clock.sleeps == 0)
    }

    @Test func waitingTimesOutWithUnavailableAndTheReason() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("TinyStorageTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (storage, _) = try unreadableStore(in: directory)

        let clock = VirtualClock()
        let start = clock.now
        do {
            try await storage.waitUntilAvailable(timeout: .seconds(5), pollInterval: .seconds(1), clock: clock)
            Issue.record("waitUntilAvailable returned for a store that never became available")
        } catch let error as TinyStorageError {
            #expect(error.code == .unavailable, "\(error)")
            #expect((error.underlying as? TinyStorageError)?.code == .permissionDenied, "\(error)")
        }
        // It waited, polling, until exactly the deadline (virtual time: no real waiting).
        #expect(clock.now == start.advanced(by: .seconds(5)))
        #expect(clock.sleeps >= 1)
    }

    @Test func waitingReturnsOnceTheStoreBecomesAvailable() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("TinyStorageTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try makeStore(in: directory, values: streakValues)
        // The data file cannot be opened the first four times it is tried, then it can.
        let failuresLeft = Locked(4)
        let io = FileIO { call, path in
            guard call == .open, path?.hasSuffix("/store.tinystorage") == true else { return nil }
            return failuresLeft.withLock { left in
                guard left > 0 else { return nil }
                left -= 1
                return .fail(.accessDenied)
            }
        }
        // NB: without a file watch, whose own looks would open the store before the wait does.
        let storage = openStore(directory, io: io, options: Engine.Options(watchesChanges: false))
        #expect(!storage.availability.isAvailable)

        let clock = VirtualClock()
        try await storage.waitUntilAvailable(timeout: .seconds(3_600), pollInterval: .seconds(1), clock: clock)
        #expect(clock.sleeps >= 1, "it returned without waiting")
        #expect(failuresLeft.withLock { $0 } == 0)
        #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
    }

    @Test func waitingIsCancelledWhileSleeping() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("TinyStorageTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (storage, _) = try unreadableStore(in: directory)

        let clock = VirtualClock(parksSleepers: true)
        let waiter = Task {
            try await storage.waitUntilAvailable(timeout: nil, pollInterval: .seconds(1), clock: clock)
        }
        var sleepers = clock.sleepers.makeAsyncIterator()
        _ = await sleepers.next()  // the waiter is now asleep on the clock
        waiter.cancel()
        let result = await waiter.result
        #expect(throws: CancellationError.self) { try result.get() }
    }

    @Test func waitingWithTheDefaultClockIsCancellable() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("TinyStorageTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (storage, _) = try unreadableStore(in: directory)

        let waiter = Task { try await storage.waitUntilAvailable() }
        waiter.cancel()
        let result = await waiter.result
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(!storage.availability.isAvailable)
    }
}
