import Foundation
import Observation
import Testing

@testable import TinyStorage

extension TinyStorage.Key where Value == Int {
    fileprivate static var memoryLaunches: Self { .init("launches", default: 10) }
}

private enum MemoryAccount: String, TinyStorageKeyGroup {
    case userName, token
}

/// Issue 5, item 5: `TinyStorage.inMemory()` has the same API and behaviour as a file-backed
/// store — round trips, typed errors, atomic updates, notifications, Observation, value streams —
/// and touches no file. Each instance is its own store.
@Suite struct InMemoryStoreTests {
    struct Profile: Codable, Sendable, Equatable {
        var name: String
        var joined: Date
        var scores: [Double]
    }

    @Test func everyKindOfValueRoundTrips() throws {
        let storage = TinyStorage.inMemory(logger: TestLogger())
        let profile = Profile(name: "Ada", joined: Date(timeIntervalSinceReferenceDate: 1_000.5), scores: [1, 2.5])
        try storage.storeOrThrow(364, forKey: "streak")
        try storage.storeOrThrow("Ada \"Lovelace\"\n", forKey: "name")
        try storage.storeOrThrow(true, forKey: "flag")
        try storage.storeOrThrow(-2.5e-8, forKey: "double")
        try storage.storeOrThrow(profile, forKey: "profile")
        try storage.storeOrThrow(Data([0, 255]), forKey: "data")
        try storage.storeOrThrow(["b": [1], "a": []], forKey: "dict")

        #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
        #expect(storage.retrieve(type: String.self, forKey: "name") == "Ada \"Lovelace\"\n")
        #expect(storage.bool(forKey: "flag"))
        #expect(storage.retrieve(type: Double.self, forKey: "double") == -2.5e-8)
        #expect(storage.retrieve(type: Profile.self, forKey: "profile") == profile)
        #expect(storage.retrieve(type: Data.self, forKey: "data") == Data([0, 255]))
        #expect(storage.retrieve(type: [String: [Int]].self, forKey: "dict") == ["b": [1], "a": []])
        #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "absent") == nil)
        #expect(
            Set(storage.allKeys.map(\.rawValue)) == ["streak", "name", "flag", "double", "profile", "data", "dict"])
        expectError(.decodingFailed) { try storage.retrieveOrThrow(type: Int.self, forKey: "name") }
    }

    @Test func writesRemovesAndAtomicUpdatesBehaveAsOnDisk() throws {
        let storage = TinyStorage.inMemory(logger: TestLogger())
        storage.store(1, forKey: "a")
        storage.store(nil, forKey: "a")
        #expect(!storage.contains("a"))
        storage.bulkStore(items: ["a": 1, "b": 2])
        storage.bulkStore(items: ["a": 100, "c": 3], skipKeyIfAlreadyPresent: true)
        #expect(storage.integer(forKey: "a") == 1)
        #expect(storage.integer(forKey: "c") == 3)
        #expect(storage.incrementInteger(forKey: "a", by: 4) == 5)
        #expect(
            try storage.update("b", as: Int.self) { value -> Int in
                value = (value ?? 0) * 10
                return value ?? 0
            } == 20)
        storage.remove(key: "c")
        #expect(try storage.rawJSON() == ["a": Data("5".utf8), "b": Data("20".utf8)])
        storage.reset()
        #expect(storage.allKeys.isEmpty)

        // Typed keys and groups.
        #expect(storage[.memoryLaunches] == 10)
        storage[.memoryLaunches] += 1
        #expect(try storage.value(for: .memoryLaunches) == 11)
        let account = storage.group(MemoryAccount.self)
        account.store("ada", forKey: .userName)
        #expect(account.retrieve(type: String.self, forKey: .userName) == "ada")
        #expect(storage.contains("MemoryAccount.userName"))
        account.reset()
        #expect(!account.contains(.userName))

        // The same typed errors, nothing stored.
        expectError(.invalidKey) { try storage.storeOrThrow(1, forKey: "") }
        expectError(.encodingFailed) { try storage.bulkStoreOrThrow(items: ["nan": Double.nan]) }
        #expect(throws: EncodingError.self) { try storage.storeOrThrow(Double.nan, forKey: "nan") }
        expectError(.decodingFailed) {
            storage.store("text", forKey: "t")
            return try storage.incrementIntegerOrThrow(forKey: "t")
        }
        #expect(try storage.rawJSON().keys.sorted() == ["launches", "t"])
    }

    @Test func concurrentIncrementsLoseNoUpdate() {
        let storage = TinyStorage.inMemory(logger: TestLogger())
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<250 { storage.incrementInteger(forKey: "count") }
        }
        #expect(storage.integer(forKey: "count") == 2_000)
    }

    /// `inMemory()`'s paths lie under `/dev/null`, where nothing can exist: the same store given
    /// a real, empty directory and a file layer that records every call shows it touches nothing.
    @Test func itIsAlwaysAvailableAndTouchesNoFile() async throws {
        let preview = TinyStorage.inMemory(name: "preview", logger: TestLogger())
        #expect(preview.availability.isAvailable)
        try await withScratchDirectory { directory in
            let calls = Locked<[FileIO.Call]>([])
            let io = FileIO { call, _ in
                calls.withLock { $0.append(call) }
                return nil
            }
            let storage = TinyStorage(
                insideDirectory: directory, name: "preview", durability: .immediate, io: io, logger: TestLogger(),
                inMemory: true)
            #expect(storage.availability.isAvailable)
            try await storage.waitUntilAvailable(timeout: .seconds(1))
            try storage.storeOrThrow(1, forKey: "k")
            try storage.resetOrThrow()
            try storage.storeOrThrow(2, forKey: "k")
            try storage.synchronize()
            try storage.compactNow()
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "k") == 2)
            #expect(storage.recoveryReports.isEmpty)
            #expect(calls.withLock { $0 }.isEmpty, "file calls: \(calls.withLock { $0 })")
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
        }
    }

    /// `compactNow()` (the `tinystorage compact` command's entry point) has nothing to rewrite in
    /// memory: it must keep every value and not report the store as unavailable.
    @Test func compactingAnInMemoryStoreKeepsEveryValue() throws {
        let storage = TinyStorage.inMemory(logger: TestLogger())
        try storage.storeOrThrow(364, forKey: "streak")
        #expect(throws: Never.self) { try storage.compactNow() }
        #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
    }

    @Test func twoInMemoryStoresAreIndependent() throws {
        let first = TinyStorage.inMemory(logger: TestLogger())
        let second = TinyStorage.inMemory(logger: TestLogger())
        try first.storeOrThrow(1, forKey: "k")
        #expect(try second.retrieveOrThrow(type: Int.self, forKey: "k") == nil)
        try second.storeOrThrow(2, forKey: "k")
        #expect(first.integer(forKey: "k") == 1)
        first.reset()
        #expect(second.integer(forKey: "k") == 2)
        // The same name changes nothing: names only matter on disk.
        let named = TinyStorage.inMemory(name: "shared", logger: TestLogger())
        named.store(3, forKey: "k")
        #expect(TinyStorage.inMemory(name: "shared", logger: TestLogger()).allKeys.isEmpty)
    }

    @Test func changesAreAnnouncedWithKeysAndWriteIDButOnlyForThatStore() throws {
        let storage = TinyStorage.inMemory(logger: TestLogger())
        let other = TinyStorage.inMemory(logger: TestLogger())
        let received = Locked<[(keys: [String], writeID: String?)]>([])
        let observer = NotificationCenter.default.addObserver(
            forName: TinyStorage.didChangeNotification, object: storage, queue: nil
        ) { notification in
            let keys = notification.userInfo?[TinyStorage.changedKeysUserInfoKey] as? [String] ?? []
            let writeID = notification.userInfo?[TinyStorage.writeIDUserInfoKey] as? String
            received.withLock { $0.append((keys.sorted(), writeID)) }
        }
        defer { NotificationCenter.default.removeObserver(observer) }

        let writeID = UUID().uuidString
        storage.store(1, forKey: "a", writeID: writeID)
        storage.store(1, forKey: "a")  // unchanged bytes: nothing to announce
        storage.bulkStore(items: ["b": 2, "c": 3])
        other.store(9, forKey: "a")
        storage.engine.delivery.waitUntilDelivered()
        other.engine.delivery.waitUntilDelivered()

        let announcements = received.withLock { $0 }
        #expect(announcements.map(\.keys) == [["a"], ["b", "c"]])
        #expect(announcements.map(\.writeID) == [writeID, nil])
    }

    @Test(.timeLimit(.minutes(1)))
    func valueStreamsYieldTheCurrentValueThenEveryChange() async throws {
        let storage = TinyStorage.inMemory(logger: TestLogger())
        storage.store(1, forKey: "streak")
        var values = storage.values(forKey: "streak", as: Int.self).makeAsyncIterator()
        #expect(await values.next() == .some(1))
        storage.store(2, forKey: "streak")
        storage.store(nil, forKey: "streak")
        #expect(await values.next() == .some(2))
        #expect(await values.next() == .some(nil))
    }

    @MainActor
    @Test func observationTracksReadsOfAKey() throws {
        let storage = TinyStorage.inMemory(logger: TestLogger())
        let changed = Locked(0)
        withObservationTracking {
            _ = storage.autoUpdatingRetrieve(type: Int.self, forKey: "streak")
        } onChange: {
            changed.withLock { $0 += 1 }
        }
        storage.store(1, forKey: "other")
        storage.engine.delivery.waitUntilDelivered()
        #expect(changed.withLock { $0 } == 0)
        storage.store(1, forKey: "streak")
        storage.engine.delivery.waitUntilDelivered()
        #expect(changed.withLock { $0 } == 1)
    }
}
