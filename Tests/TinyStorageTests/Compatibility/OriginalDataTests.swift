import Foundation
import Testing
import TinyStorage

/// Issue 9, items 3 and 4: data written by 2.x — its `tiny-storage.plist`, and what its
/// `migrate` took from `UserDefaults` — reads back exactly; `Data` is stored as its raw bytes.
@Suite struct OriginalDataTests {
    /// A 2.x store: a `Data` value as its raw bytes, every other value as its JSON.
    static func originalStore() throws -> (values: [String: Data], profile: CompatProfile, avatar: Data, json: Data) {
        let profile = CompatProfile(
            name: "Grace", joined: Date(timeIntervalSinceReferenceDate: 700_000_000.5), tags: ["x"])
        let avatar = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0xFF])
        // An app that stored JSON it had encoded itself, as Data: 2.x kept those bytes as they are.
        let json = try JSONEncoder().encode(["id": 42])
        let values: [String: Data] = [
            "avatar": avatar,
            "preencoded": json,
            "lastOpened": try JSONEncoder().encode(profile.joined),
            "profile": try JSONEncoder().encode(profile),
            "flags": try JSONEncoder().encode([true, false, true]),
            "features": try JSONEncoder().encode(["sync": true, "beta": false]),
            "streak": try JSONEncoder().encode(364),
        ]
        return (values, profile, avatar, json)
    }

    @Test func a2xStoreHoldingDataDateStructAndBoolCollectionsIsAdoptedAndReadBackExactly() async throws {
        let original = try Self.originalStore()
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("TinyStorageCompat-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try writeOriginalPlist(original.values, in: directory)

        for round in 0..<2 {
            // Round 0 reads what was adopted; round 1 reopens after a commit rewrote the file.
            let storage = TinyStorage(insideDirectory: directory, name: "unit", logger: CompatLogger())
            #expect(try storage.retrieveOrThrow(type: Data.self, forKey: "avatar") == original.avatar, "round \(round)")
            #expect(try storage.retrieveOrThrow(type: Data.self, forKey: "preencoded") == original.json)
            #expect(try storage.retrieveOrThrow(type: [String: Int].self, forKey: "preencoded") == ["id": 42])
            #expect(try storage.retrieveOrThrow(type: Date.self, forKey: "lastOpened") == original.profile.joined)
            #expect(try storage.retrieveOrThrow(type: CompatProfile.self, forKey: "profile") == original.profile)
            #expect(try storage.retrieveOrThrow(type: [Bool].self, forKey: "flags") == [true, false, true])
            #expect(
                try storage.retrieveOrThrow(type: [String: Bool].self, forKey: "features") == [
                    "sync": true, "beta": false,
                ])
            #expect(storage.integer(forKey: "streak") == (round == 0 ? 364 : 365))
            #expect(storage.allKeys.count == 7)
            if round == 0 { try storage.storeOrThrow(365, forKey: "streak") }
        }
    }

    @Test func userDefaultsDataAndBoolCollectionsAreMigratedWithSetsOfKeys() async throws {
        try await withCompatStore { storage, _ throws in
            let suite = "TinyStorageCompat-\(UUID().uuidString)"
            let defaults = try #require(UserDefaults(suiteName: suite))
            defer { defaults.removePersistentDomain(forName: suite) }
            let blob = Data((0...255).map { UInt8($0) })
            let encoded = try JSONEncoder().encode(
                CompatProfile(name: "Ada", joined: Date(timeIntervalSince1970: 0), tags: []))
            defaults.set(blob, forKey: "blob")
            defaults.set(encoded, forKey: "encodedProfile")
            defaults.set([true, false], forKey: "flags")
            defaults.set(["a": true, "b": false], forKey: "byName")
            defaults.set(true, forKey: "onboarded")
            defaults.set(1, forKey: "count")

            let nonBoolKeys: Set<String> = ["blob", "encodedProfile", "count"]
            let boolKeys: Set<String> = ["flags", "byName", "onboarded"]
            storage.migrate(
                userDefaults: defaults, nonBoolKeys: nonBoolKeys, boolKeys: boolKeys,
                overwriteTinyStorageIfConflict: false)

            #expect(storage.retrieve(type: Data.self, forKey: "blob") == blob)
            #expect(storage.retrieve(type: Data.self, forKey: "encodedProfile") == encoded)
            #expect(storage.retrieve(type: CompatProfile.self, forKey: "encodedProfile")?.name == "Ada")
            #expect(storage.retrieve(type: [Bool].self, forKey: "flags") == [true, false])
            #expect(storage.retrieve(type: [String: Bool].self, forKey: "byName") == ["a": true, "b": false])
            #expect(storage.bool(forKey: "onboarded"))
            #expect(storage.integer(forKey: "count") == 1)
            // The report says what happened, for both spellings of the key lists.
            let report = storage.migrate(
                userDefaults: defaults, nonBoolKeys: ["blob"], boolKeys: ["flags", "missing"],
                overwriteTinyStorageIfConflict: true)
            #expect(report?.migrated.sorted() == ["blob", "flags"])
            #expect(report?.skipped == ["missing": .absent])
        }
    }

    @Test func dataIsStoredAsItsRawBytesThroughEveryAPIAndReadBackExactly() async throws {
        enum Files: String, TinyStorageKeyGroup { case icon }
        struct Attachment: Codable, Equatable { var name: String; var bytes: Data }
        try await withCompatStore { storage, directory throws in
            let bytes = Data([0, 1, 2, 0xFE, 0xFF, 0x22, 0x5C])
            let key = TinyStorage.Key<Data>("typed", default: Data())
            let optionalKey = TinyStorage.Key<Data?>("optional")
            storage.store(bytes, forKey: "store")
            storage.bulkStore(items: [
                "bulk": bytes, "list": [bytes], "attachment": Attachment(name: "a", bytes: bytes),
            ])
            storage[key] = bytes
            storage[optionalKey] = bytes
            storage.group(Files.self).store(bytes, forKey: .icon)
            try storage.update("updated", as: Data.self) { $0 = bytes }
            TinyStorageItem(wrappedValue: Data(), "item", storage: storage).wrappedValue = bytes

            // The bytes themselves are on disk, as 2.x stores them: readable by the original's rule.
            let file = try Data(contentsOf: storage.fileURL)
            #expect(file.range(of: bytes) != nil)
            let reopened = TinyStorage(insideDirectory: directory, name: "unit")
            for name in ["store", "bulk", "typed", "optional", "Files.icon", "updated", "item"] {
                #expect(reopened.retrieve(type: Data.self, forKey: name) == bytes, "\(name)")
            }
            #expect(reopened[key] == bytes)
            #expect(reopened[optionalKey] == bytes)
            // Collections and structs holding Data stay JSON (base64 inside), as JSONEncoder writes them.
            #expect(reopened.retrieve(type: [Data].self, forKey: "list") == [bytes])
            #expect(
                reopened.retrieve(type: Attachment.self, forKey: "attachment") == Attachment(name: "a", bytes: bytes))
            #expect(file.range(of: try JSONEncoder().encode(bytes)) != nil)
        }
    }

    @Test func noOpWritesCompareKindAndBytesAndPostNothing() async throws {
        try await withCompatStore { storage, _ throws in
            let suite = "TinyStorageCompat-\(UUID().uuidString)"
            let defaults = try #require(UserDefaults(suiteName: suite))
            defer { defaults.removePersistentDomain(forName: suite) }
            defaults.set(true, forKey: "flag")
            defaults.set(42, forKey: "number")
            let notifications = CompatNotifications(storage)
            storage.store(true, forKey: "flag")
            storage.store(42, forKey: "number")
            storage.store("value", forKey: "key1")
            storage.store(Data("1".utf8), forKey: "bytes")
            let size = try committedLength(storage.fileURL)

            storage.store("value", forKey: "key1", writeID: "no-op store")
            storage.bulkStore(items: ["key1": "value", "flag": true], writeID: "no-op bulkStore")
            storage.bulkStore(items: ["absent": nil], writeID: "no-op removal")
            storage.remove(key: "absent", writeID: "no-op remove")
            storage.store(Data("1".utf8), forKey: "bytes", writeID: "no-op data")
            storage.migrate(
                userDefaults: defaults, nonBoolKeys: ["number"], boolKeys: ["flag"],
                overwriteTinyStorageIfConflict: true,
                writeID: "no-op migrate")
            #expect(try committedLength(storage.fileURL) == size)

            // The same bytes with another kind are a change: JSON 1 and the Data "1" differ.
            storage.store(1, forKey: "bytes", writeID: "kind changed")
            #expect(notifications.wait(forCount: 5).dropFirst(4) == [.init(keys: ["bytes"], writeID: "kind changed")])
            #expect(storage.integer(forKey: "bytes") == 1)
        }
    }
}
