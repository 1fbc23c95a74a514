import Foundation
import Testing

@testable import TinyStorage

/// A store runs entirely on the simulated disk: the engine reaches the disk only through
/// `FileIO`, and the simulated calls answer as the real ones do.
@Suite struct StoreOnSimulatedDiskTests {
    struct Settings: Codable, Equatable {
        var theme: String
        var fontSize: Int
    }

    @Test(arguments: [TinyStorage.Durability.standard, .immediate])
    func everyKindOfCommitWorksAndReadsBackAfterReopening(durability: TinyStorage.Durability) throws {
        let disk = SimulatedStore.makeDisk()
        var storage: TinyStorage? = SimulatedStore.open(on: disk, durability: durability)
        let store = try #require(storage)
        try store.storeOrThrow(364, forKey: "streak")
        try store.storeOrThrow(Settings(theme: "dark", fontSize: 13), forKey: "settings")
        try store.update("streak", as: Int.self) { $0 = ($0 ?? 0) + 1 }
        try store.bulkStoreOrThrow(items: ["a": 1, "b": "two"])
        try store.resetOrThrow()
        try store.bulkStoreOrThrow(items: ["a": 1, "b": "two", "streak": 365])
        try store.storeOrThrow(nil, forKey: "b")
        try store.compactNow()
        try store.storeOrThrow(Settings(theme: "light", fontSize: 15), forKey: "settings")
        try store.synchronize()
        #expect(store.incrementInteger(forKey: "streak") == 366)
        storage = nil

        let reopened = SimulatedStore.open(on: disk, durability: durability)
        #expect(try reopened.retrieveOrThrow(type: Int.self, forKey: "streak") == 366)
        #expect(
            try reopened.retrieveOrThrow(type: Settings.self, forKey: "settings")
                == Settings(theme: "light", fontSize: 15))
        #expect(try reopened.retrieveOrThrow(type: Int.self, forKey: "a") == 1)
        #expect(try reopened.retrieveOrThrow(type: String.self, forKey: "b") == nil)
        #expect(reopened.recoveryReports.isEmpty)
        #expect(disk.names(inDirectoryAtPath: SimulatedStore.directoryPath) == ["store.lock", "store.tinystorage"])
        #expect(try headerGeneration(of: disk) == 2, "compacted once")
    }

    /// The store's folder exists, but its name is not durable: the process that made it died
    /// before it flushed the folder's parent (or the app made it and never did). The process that
    /// creates the data file flushes that name too, so an `.immediate` commit survives a power
    /// loss. On main before, the folder and every commit flushed inside it were lost (found by the
    /// simulation: a process killed right after its `mkdir`).
    @Test func anImmediateCommitInAFolderWhoseNameWasNeverFlushedSurvivesAPowerLoss() throws {
        let disk = SimulatedStore.makeDisk()
        _ = disk.makeDirectory(atPath: SimulatedStore.directoryPath, mode: 0o700)
        let store = SimulatedStore.open(on: disk, durability: .immediate)
        try store.storeOrThrow("kept", forKey: "acknowledged")

        let after = disk.crash(seed: 1, style: .losesEverything)
        let reopened = SimulatedStore.open(on: after, durability: .immediate)
        #expect(try reopened.rawEntries() == ["acknowledged": StoredValue(Data("\"kept\"".utf8), kind: .json)])
    }

    @Test func whatWasSynchronizedSurvivesAPowerLossThatLosesEverythingElse() throws {
        let disk = SimulatedStore.makeDisk()
        disk.makeSettledDirectories(atPath: SimulatedStore.directoryPath)
        let store = SimulatedStore.open(on: disk, durability: .standard)
        try store.storeOrThrow("kept", forKey: "flushed")
        try store.synchronize()
        try store.storeOrThrow("lost", forKey: "unflushed")
        #expect(disk.hasPendingChanges(atPath: SimulatedStore.dataPath), "a .standard commit is not flushed")

        let after = disk.crash(seed: 1, style: .losesEverything)
        let reopened = SimulatedStore.open(on: after, durability: .standard)
        #expect(try reopened.rawEntries() == ["flushed": StoredValue(Data("\"kept\"".utf8), kind: .json)])
        #expect(throws: TinyStorageError.self, "the crashed disk fails every call") {
            try store.storeOrThrow(1, forKey: "x")
        }
    }

    /// `synchronize()` leaves nothing pending, the durable mark it wrote included: a cut below
    /// what it flushed is then data loss (issue 11), never taken for a power loss.
    @Test(arguments: [TinyStorage.Durability.standard, .immediate])
    func synchronizeFlushesTheDurableMarkToo(durability: TinyStorage.Durability) throws {
        let disk = SimulatedStore.makeDisk()
        disk.makeSettledDirectories(atPath: SimulatedStore.directoryPath)
        let store = SimulatedStore.open(on: disk, durability: durability)
        try store.storeOrThrow("kept", forKey: "flushed")
        try store.synchronize()
        #expect(!disk.hasPendingChanges(atPath: SimulatedStore.dataPath))

        let after = disk.crash(seed: 0, style: .losesEverything)
        let log = LogFormat.framesEnd(of: try #require(after.contents(atPath: SimulatedStore.dataPath)))
        after.cutDurably(atPath: SimulatedStore.dataPath, to: log - 1)
        let reopened = SimulatedStore.open(on: after, durability: durability)
        #expect(throws: TinyStorageError.self, "the loss is reported") { try reopened.rawEntries() }
        #expect(reopened.recoveryReports.map(\.isDataLoss) == [true])
    }

    /// The background flush `.standard` commits schedule flushes them and then the durable mark
    /// that records them: once it ran, a power loss keeps them, and a cut below them is data loss.
    @Test func theBackgroundFlushMakesStandardCommitsAndTheirMarkDurable() throws {
        let disk = SimulatedStore.makeDisk()
        disk.makeSettledDirectories(atPath: SimulatedStore.directoryPath)
        let flushes = ManualFlushes()
        let store = SimulatedStore.open(on: disk, durability: .standard, flushes: flushes)
        for index in 0..<3 { try store.storeOrThrow(index, forKey: "k\(index)") }
        #expect(flushes.count == 1, "one flush for the commits made before it runs")
        #expect(disk.hasPendingChanges(atPath: SimulatedStore.dataPath))

        #expect(flushes.runAll() == 2, "the data, then the mark that records it")
        #expect(!disk.hasPendingChanges(atPath: SimulatedStore.dataPath))
        let after = disk.crash(seed: 0, style: .losesEverything)
        #expect(try SimulatedStore.open(on: after, durability: .standard).rawEntries().count == 3)

        let log = LogFormat.framesEnd(of: try #require(after.contents(atPath: SimulatedStore.dataPath)))
        after.cutDurably(atPath: SimulatedStore.dataPath, to: log - 1)
        let cut = SimulatedStore.open(on: after, durability: .standard)
        #expect(throws: TinyStorageError.self, "the loss is reported") { try cut.rawEntries() }
        #expect(cut.recoveryReports.map(\.isDataLoss) == [true])
    }

    @Test func anImmediateCommitIsFlushedBeforeItReturns() throws {
        let disk = SimulatedStore.makeDisk()
        disk.makeSettledDirectories(atPath: SimulatedStore.directoryPath)
        let store = SimulatedStore.open(on: disk, durability: .immediate)
        try store.storeOrThrow(1, forKey: "a")
        // NB: the durable mark is written after the flush it records and reaches the disk with
        // the next one; only those header bytes may still be pending.
        #expect(!disk.hasPendingChanges(atPath: SimulatedStore.dataPath, outside: LogHeader.durableSlotsRange))
        #expect(!disk.hasPendingChanges(atPath: SimulatedStore.directoryPath))
        let reopened = SimulatedStore.open(on: disk.crash(seed: 0, style: .losesEverything), durability: .immediate)
        #expect(try reopened.rawEntries() == ["a": StoredValue(Data("1".utf8), kind: .json)])
    }

    @Test func twoInstancesShareTheLockAndTheCounterPage() throws {
        let disk = SimulatedStore.makeDisk()
        let first = SimulatedStore.open(on: disk, durability: .standard)
        let second = SimulatedStore.open(on: disk, durability: .standard)
        try first.storeOrThrow(1, forKey: "a")
        #expect(
            try second.rawValue(forKey: "a")?.bytes == Data("1".utf8), "a read after another instance's commit sees it")
        try second.update("a", as: Int.self) { $0 = ($0 ?? 0) + 1 }
        #expect(try first.retrieveOrThrow(type: Int.self, forKey: "a") == 2)
        try second.compactNow()
        try first.storeOrThrow(3, forKey: "b")
        #expect(try second.rawEntries().mapValues(\.bytes) == ["a": Data("2".utf8), "b": Data("3".utf8)])
    }

    /// The generation in the header of the store's data file on `disk`.
    func headerGeneration(of disk: SimulatedDisk) throws -> UInt64 {
        let bytes = try #require(disk.contents(atPath: SimulatedStore.dataPath))
        return try bytes.withUnsafeBytes { try LogHeader.decode($0).get() }.generation
    }
}
