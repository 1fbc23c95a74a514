import Foundation
import Testing

@testable import TinyStorage

extension TinyStorage.Key where Value == Int {
    fileprivate static var barrierStreak: Self { .init("streak", default: 0) }
}

private enum BarrierGroup: String, TinyStorageKeyGroup {
    case token, userId
}

/// G2, the never-clobber barrier: while a store is unavailable, every write path is refused —
/// the throwing spelling throws `.unavailable`, the plain one logs and returns — and not one byte
/// of the store's folder changes, whatever made it unavailable.
@Suite struct WriteBarrierTests {
    /// Why the store cannot be read.
    enum Cause: String, CaseIterable, Sendable {
        /// `open(2)` of the data file fails with `EACCES` (a permission, data protection).
        case openDenied
        /// Reading the data file fails with `EIO` (a failing disk).
        case readFails
        /// The data file holds nothing verifiable (another program's file).
        case foreignFile
        /// The data file was written by a newer, incompatible version.
        case newerFormat
    }

    /// A store holding ``streakValues`` made unavailable by `cause`, its folder's snapshot, and a
    /// switch that removes the cause when it is a fault.
    func unavailableStore(
        _ cause: Cause, in directory: URL, logger: TestLogger
    ) throws -> (storage: TinyStorage, before: [String: Data?], faults: FaultSwitch) {
        let fileURL = try makeStore(in: directory, values: streakValues)
        let faults = FaultSwitch()
        switch cause {
        case .openDenied: faults.inject(failing(.open, .accessDenied, pathEndingIn: "/store.tinystorage"))
        case .readFails: faults.inject(failing(.read, .ioError))
        case .foreignFile: try Data("{\"streak\": 364}\n".utf8).write(to: fileURL)
        case .newerFormat:
            var bytes = try Data(contentsOf: fileURL)
            bytes.replaceSubrange(0..<LogFormat.headerSize, with: LogHeader(version: 99, generation: 3).encoded())
            try bytes.write(to: fileURL)
        }
        let before = try snapshot(of: directory)
        let storage = openStore(directory, io: faults.io, logger: logger)
        try #require(!storage.availability.isAvailable, "\(cause)")
        return (storage, before, faults)
    }

    /// Every write path, through its throwing spelling.
    static let throwingWrites: [(String, @Sendable (TinyStorage) throws -> Void)] = [
        ("storeOrThrow", { try $0.storeOrThrow(1, forKey: "streak") }),
        ("storeOrThrow(nil)", { try $0.storeOrThrow(nil, forKey: "streak") }),
        ("storeOrThrow(new key)", { try $0.storeOrThrow("x", forKey: "new") }),
        ("bulkStoreOrThrow", { try $0.bulkStoreOrThrow(items: ["streak": 1, "new": 2]) }),
        (
            "bulkStoreOrThrow(skipKeyIfAlreadyPresent:)",
            { try $0.bulkStoreOrThrow(items: ["streak": 0, "new": 2], skipKeyIfAlreadyPresent: true) }
        ),
        ("resetOrThrow", { try $0.resetOrThrow() }),
        ("incrementIntegerOrThrow", { _ = try $0.incrementIntegerOrThrow(forKey: "streak") }),
        ("incrementIntegerOrThrow(by: 0)", { _ = try $0.incrementIntegerOrThrow(forKey: "streak", by: 0) }),
        ("update", { try $0.update("streak", as: Int.self) { $0 = ($0 ?? 0) + 1 } }),
        ("update(typed key)", { try $0.update(.barrierStreak) { $0 += 1 } }),
        ("group storeOrThrow", { try $0.group(BarrierGroup.self).storeOrThrow("t", forKey: .token) }),
        ("group resetOrThrow", { try $0.group(BarrierGroup.self).resetOrThrow() }),
        ("group update", { try $0.group(BarrierGroup.self).update(.userId, as: Int.self) { $0 = 1 } }),
        ("storeRaw", { try $0.storeRawJSON(["streak": Data("1".utf8)]) }),
        ("removeOrThrow", { _ = try $0.removeOrThrow(key: "streak") }),
        ("compactNow", { try $0.compactNow() }),
    ]

    /// Every write path, through its non-throwing spelling.
    static let plainWrites: [(String, @Sendable (TinyStorage) -> Void)] = [
        ("store", { $0.store(1, forKey: "streak") }),
        ("store(nil)", { $0.store(nil, forKey: "streak") }),
        ("remove", { $0.remove(key: "streak") }),
        ("bulkStore", { $0.bulkStore(items: ["streak": 1, "new": 2]) }),
        ("bulkStore(skipKeyIfAlreadyPresent:)", { $0.bulkStore(items: ["new": 2], skipKeyIfAlreadyPresent: true) }),
        ("reset", { $0.reset() }),
        ("subscript set", { $0[.barrierStreak] = 1 }),
        ("subscript +=", { $0[.barrierStreak] += 1 }),
        ("remove(typed key)", { $0.remove(.barrierStreak) }),
        ("group store", { $0.group(BarrierGroup.self).store("t", forKey: .token) }),
        ("group remove", { $0.group(BarrierGroup.self).remove(key: .token) }),
        ("group reset", { $0.group(BarrierGroup.self).reset() }),
        (
            "TinyStorageItem set",
            { storage in TinyStorageItem(wrappedValue: 0, "streak", storage: storage).wrappedValue = 1 }
        ),
    ]

    @Test(arguments: Cause.allCases)
    func everyWriteIsRefusedAndLeavesEveryByte(cause: Cause) throws {
        try withTemporaryDirectory { directory throws in
            let logger = TestLogger()
            let (storage, before, faults) = try unavailableStore(cause, in: directory, logger: logger)

            for (name, write) in Self.throwingWrites {
                do {
                    try write(storage)
                    Issue.record("\(cause): \(name) did not throw")
                } catch let error as TinyStorageError {
                    #expect(error.code == .unavailable, "\(cause): \(name) threw \(error)")
                } catch {
                    Issue.record("\(cause): \(name) threw \(error)")
                }
                #expect(try snapshot(of: directory) == before, "\(cause): \(name) changed the store's folder")
            }
            for (name, write) in Self.plainWrites {
                write(storage)
                #expect(try snapshot(of: directory) == before, "\(cause): \(name) changed the store's folder")
            }
            // The increment's answer cannot be mistaken for a count (and is never stored back).
            #expect(storage.incrementInteger(forKey: "streak") == TinyStorage.incrementFailed)
            #expect(storage.incrementInteger(forKey: "streak", by: 0) == TinyStorage.incrementFailed)
            #expect(try snapshot(of: directory) == before, "\(cause): incrementInteger changed the store's folder")
            #expect(storage.recoveryReports.isEmpty)
            #expect(logger.texts(atLeast: .error).contains { $0.contains("unavailable") })

            // Once the cause is gone, nothing of the refused writes shows up: the store holds
            // exactly what it held before.
            if cause == .openDenied || cause == .readFails {
                faults.clear()
                #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
                #expect(try storage.rawJSON().keys.sorted() == ["name", "onboarded", "scores", "streak"])
                #expect(try snapshot(of: directory) == before)
            }
        }
    }

    @Test(arguments: [Cause.openDenied, .foreignFile])
    func migrationsIntoAnUnavailableStoreAreRefusedAndWriteNothing(cause: Cause) throws {
        try withUserDefaultsSuite { suite throws in
            let defaults = try fillUserDefaults(suite, ["streak": 1, "hasLaunched": true])
            try withTemporaryDirectory { directory throws in
                let (storage, before, _) = try unavailableStore(cause, in: directory, logger: TestLogger())
                expectError(.unavailable) {
                    try storage.migrate(
                        userDefaults: defaults, nonBoolKeys: ["streak"], boolKeys: [], requiring: "hasLaunched",
                        overwriteTinyStorageIfConflict: true)
                }
                let report = storage.migrate(
                    userDefaults: defaults, nonBoolKeys: ["streak"], boolKeys: ["hasLaunched"],
                    overwriteTinyStorageIfConflict: true)
                #expect(report == nil)
                #expect(
                    storage.migrate(
                        userDefaults: defaults, nonBoolKeys: ["streak"], boolKeys: [], overwriteIfConflict: true) == nil
                )
                #expect(try snapshot(of: directory) == before)
            }
        }
    }

    /// A store that was open and readable, then lost access to its file when another process
    /// committed: the barrier holds for every write path, not only the first ones.
    @Test func aStoreThatBecomesUnavailableWhileOpenRefusesEveryWrite() throws {
        try withTemporaryDirectory { directory throws in
            try makeStore(in: directory, values: streakValues)
            let faults = FaultSwitch()
            let storage = openStore(directory, io: faults.io)
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
            // NB: reads fail before the other commit, so the store cannot catch up with it when
            // its watch sees it: it is stale, and knows it.
            faults.inject(failing(.read, .ioError))
            let other = openStore(directory)
            try other.storeOrThrow(365, forKey: "streak")
            let before = try snapshot(of: directory)

            for (name, write) in Self.throwingWrites {
                #expect(throws: TinyStorageError.self, "\(name)") { try write(storage) }
                #expect(try snapshot(of: directory) == before, "\(name) changed the store's folder")
            }
            for (name, write) in Self.plainWrites {
                write(storage)
                #expect(try snapshot(of: directory) == before, "\(name) changed the store's folder")
            }
            #expect(storage.incrementInteger(forKey: "streak") == TinyStorage.incrementFailed)
            #expect(storage.retrieve(type: Int.self, forKey: "streak") == nil, "a stale 364 was answered")

            faults.clear()
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 365)
            #expect(try other.rawJSON() == storage.rawJSON())
        }
    }
}
