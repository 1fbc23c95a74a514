import Foundation
import Testing
import TinyStorage

/// Issue 9: code written for the original TinyStorage 2.x compiles unchanged and behaves as
/// there: every public declaration, called the way 2.x apps call it, with a plain `import`.
@Suite struct OriginalAPITests {
    @Test func everyDeclarationOfTheOriginalLibraryCompilesAndBehavesAsThere() async throws {
        try await withCompatStore { storage, directory throws in
            // init(insideDirectory:name:) with its default logger, and fileURL.
            let plain = TinyStorage(insideDirectory: directory, name: "unit")
            #expect(FileManager.default.fileExists(atPath: plain.fileURL.path))

            let profile = CompatProfile(name: "Ada", joined: Date(timeIntervalSince1970: 1_700_000_000), tags: ["a"])
            let optional: (any Codable)? = profile
            storage.store(optional, forKey: CompatKey.profile)
            try storage.storeOrThrow(364, forKey: CompatKey.streak, writeID: "launch")
            storage.store(true, forKey: "onboarded", writeID: nil)
            #expect(storage.retrieve(type: CompatProfile.self, forKey: CompatKey.profile) == profile)
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
            #expect(storage.bool(forKey: CompatKey.onboarded))
            #expect(storage.integer(forKey: CompatKey.streak) == 364)
            #expect(storage.contains(CompatKey.streak))
            #expect(Set(storage.allKeys.map(\.rawValue)) == ["profile", "streak", "onboarded"])

            #expect(storage.incrementInteger(forKey: CompatKey.streak) == 365)
            #expect(storage.incrementInteger(forKey: "streak", by: 5, writeID: "sync") == 370)
            storage.remove(key: CompatKey.onboarded)
            storage.remove(key: "absent", writeID: "cleanup")
            #expect(!storage.contains("onboarded"))
            storage.store(nil, forKey: CompatKey.profile)
            #expect(storage.retrieve(type: CompatProfile.self, forKey: "profile") == nil)

            storage.bulkStore(items: ["a": 1, "b": "two"])
            storage.bulkStore(items: ["a": 9, "c": true], skipKeyIfAlreadyPresent: true, writeID: "defaults")
            #expect(storage.integer(forKey: "a") == 1)
            #expect(storage.bool(forKey: "c"))

            storage.reset(writeID: "logout")
            storage.reset()
            #expect(storage.allKeys.isEmpty)
            #expect(TinyStorage(insideDirectory: directory, name: "unit").allKeys.isEmpty)

            let name: Notification.Name = TinyStorage.didChangeNotification
            let keysKey: String = TinyStorage.changedKeysUserInfoKey
            let writeIDKey: String = TinyStorage.writeIDUserInfoKey
            #expect(!name.rawValue.isEmpty && keysKey != writeIDKey)
        }
    }

    /// Issue 34, item 9: 2.x's strings, so code that spells them out keeps receiving changes.
    @Test func theNotificationAndItsUserInfoKeysAreSpelledAs2xSpellsThem() throws {
        #expect(TinyStorage.didChangeNotification.rawValue == "com.christianselig.TinyStorage.didChangeNotification")
        #expect(TinyStorage.changedKeysUserInfoKey == "TinyStorage.changedKeys")
        #expect(TinyStorage.writeIDUserInfoKey == "TinyStorage.WriteIDKey")

        let storage = TinyStorage.inMemory(notificationQueue: DispatchQueue(label: "spelled-out"))
        let received = CollectedUserInfo()
        let token = NotificationCenter.default.addObserver(
            forName: Notification.Name("com.christianselig.TinyStorage.didChangeNotification"), object: storage,
            queue: nil
        ) { notification in
            received.append(
                keys: notification.userInfo?["TinyStorage.changedKeys"] as? [String],
                writeID: notification.userInfo?["TinyStorage.WriteIDKey"] as? String)
        }
        defer { NotificationCenter.default.removeObserver(token) }
        storage.store(1, forKey: "streak", writeID: "spelled")
        let first = try #require(received.wait(forCount: 1).first)
        #expect(first.keys == ["streak"] && first.writeID == "spelled")
    }

    @Test @MainActor func autoUpdatingRetrievesAnswerLikeRetrieve() async throws {
        try await withCompatStore { storage, _ throws in
            storage.store(3, forKey: "count")
            #expect(storage.autoUpdatingRetrieve(type: Int.self, forKey: "count") == 3)
            #expect(try storage.autoUpdatingRetrieveOrThrow(type: Int.self, forKey: CompatKey.streak) == nil)
            storage.store("text", forKey: "streak")
            #expect(throws: (any Error).self) {
                try storage.autoUpdatingRetrieveOrThrow(type: Int.self, forKey: CompatKey.streak)
            }
        }
    }

    /// Issue 9, item 1: `writeID` is `String?` on every write, typed keys and groups included, and
    /// observers read it back as a `String`.
    @Test func writeIDsAreStringsOnEveryWriteAndReachObserversAsStrings() async throws {
        enum Settings: String, TinyStorageKeyGroup { case theme, size }
        try await withCompatStore { storage, _ throws in
            let suite = "TinyStorageCompat-\(UUID().uuidString)"
            let defaults = try #require(UserDefaults(suiteName: suite))
            defer { defaults.removePersistentDomain(forName: suite) }
            defaults.set(7, forKey: "fromDefaults")
            let notifications = CompatNotifications(storage)
            let group = storage.group(Settings.self)
            let key = TinyStorage.Key<Int>("typed", default: 0)

            storage.store(1, forKey: "a", writeID: "store")
            try storage.storeOrThrow(2, forKey: "a", writeID: "storeOrThrow é 🔑")
            storage.incrementInteger(forKey: "a", writeID: "increment")
            try storage.incrementIntegerOrThrow(forKey: "a", writeID: "")
            storage.bulkStore(items: ["b": 1, "c": 2], writeID: "bulkStore")
            try storage.bulkStoreOrThrow(items: ["b": nil], writeID: "bulkStoreOrThrow")
            storage.migrate(
                userDefaults: defaults, nonBoolKeys: ["fromDefaults"], boolKeys: [],
                overwriteTinyStorageIfConflict: true,
                writeID: "migrate")
            try storage.update("a", as: Int.self, writeID: "update") { $0 = 10 }
            try storage.update(key, writeID: "typed update") { $0 = 5 }
            storage.remove(key, writeID: "typed remove")
            group.store("dark", forKey: .theme, writeID: "group store")
            try group.storeOrThrow(12, forKey: .size, writeID: "group storeOrThrow")
            try group.update(.size, as: Int.self, writeID: "group update") { $0 = 13 }
            group.remove(key: .theme, writeID: "group remove")
            group.reset(writeID: "group reset")
            storage.remove(key: "a", writeID: "remove")
            storage.reset(writeID: "reset")

            let expected: [CompatNotifications.Received] = [
                .init(keys: ["a"], writeID: "store"), .init(keys: ["a"], writeID: "storeOrThrow é 🔑"),
                .init(keys: ["a"], writeID: "increment"), .init(keys: ["a"], writeID: ""),
                .init(keys: ["b", "c"], writeID: "bulkStore"), .init(keys: ["b"], writeID: "bulkStoreOrThrow"),
                .init(keys: ["fromDefaults"], writeID: "migrate"), .init(keys: ["a"], writeID: "update"),
                .init(keys: ["typed"], writeID: "typed update"), .init(keys: ["typed"], writeID: "typed remove"),
                .init(keys: ["Settings.theme"], writeID: "group store"),
                .init(keys: ["Settings.size"], writeID: "group storeOrThrow"),
                .init(keys: ["Settings.size"], writeID: "group update"),
                .init(keys: ["Settings.theme"], writeID: "group remove"),
                .init(keys: ["Settings.size"], writeID: "group reset"), .init(keys: ["a"], writeID: "remove"),
                .init(keys: ["c", "fromDefaults"], writeID: "reset"),
            ]
            #expect(notifications.wait(forCount: expected.count) == expected)
        }
    }

    /// Issue 9, item 1: a writeID is at most `maximumWriteIDLength` bytes of UTF-8; a longer one is
    /// refused with `.invalidWriteID` (the plain spellings log it) and nothing is written.
    @Test func aWriteIDOverTheLimitIsRefusedByEveryWriteAndNothingIsWritten() async throws {
        enum Settings: String, TinyStorageKeyGroup { case theme }
        let logger = CompatLogger()
        try await withCompatStore(logger: logger) { storage, _ throws in
            let suite = "TinyStorageCompat-\(UUID().uuidString)"
            let defaults = try #require(UserDefaults(suiteName: suite))
            defer { defaults.removePersistentDomain(forName: suite) }
            defaults.set(7, forKey: "fromDefaults")
            defaults.set(true, forKey: "sentinel")
            storage.store(1, forKey: "a")
            let before = try Data(contentsOf: storage.fileURL)
            let atLimit = String(repeating: "é", count: TinyStorage.maximumWriteIDLength / 2)
            let tooLong = atLimit + "x"
            let group = storage.group(Settings.self)
            let key = TinyStorage.Key<Int>("typed", default: 0)

            let throwing: [(String, () throws -> Void)] = [
                ("storeOrThrow", { try storage.storeOrThrow(2, forKey: "a", writeID: tooLong) }),
                ("incrementIntegerOrThrow", { try storage.incrementIntegerOrThrow(forKey: "a", writeID: tooLong) }),
                ("bulkStoreOrThrow", { try storage.bulkStoreOrThrow(items: ["b": 1], writeID: tooLong) }),
                ("resetOrThrow", { try storage.resetOrThrow(writeID: tooLong) }),
                ("update", { try storage.update("a", as: Int.self, writeID: tooLong) { $0 = 3 } }),
                ("typed update", { try storage.update(key, writeID: tooLong) { $0 = 3 } }),
                ("group storeOrThrow", { try group.storeOrThrow("x", forKey: .theme, writeID: tooLong) }),
                ("group update", { try group.update(.theme, as: String.self, writeID: tooLong) { $0 = "y" } }),
                ("group resetOrThrow", { try group.resetOrThrow(writeID: tooLong) }),
                (
                    "migrate requiring",
                    {
                        _ = try storage.migrate(
                            userDefaults: defaults, nonBoolKeys: ["fromDefaults"], boolKeys: [],
                            requiring: "sentinel", writeID: tooLong)
                    }
                ),
            ]
            for (name, attempt) in throwing {
                do {
                    try attempt()
                    Issue.record("\(name): nothing was thrown")
                } catch let error as TinyStorageError {
                    #expect(error.code == .invalidWriteID, "\(name): \(error)")
                    #expect(error.message.contains("\(TinyStorage.maximumWriteIDLength)"), "\(name)")
                } catch {
                    Issue.record("\(name): \(error)")
                }
            }
            storage.store(2, forKey: "a", writeID: tooLong)
            storage.remove(key: "a", writeID: tooLong)
            storage.reset(writeID: tooLong)
            storage.incrementInteger(forKey: "a", writeID: tooLong)
            storage.bulkStore(items: ["b": 1], writeID: tooLong)
            storage.remove(key, writeID: tooLong)
            group.store("x", forKey: .theme, writeID: tooLong)
            group.remove(key: .theme, writeID: tooLong)
            group.reset(writeID: tooLong)
            let report = storage.migrate(
                userDefaults: defaults, nonBoolKeys: ["fromDefaults"], boolKeys: [],
                overwriteTinyStorageIfConflict: true,
                writeID: tooLong)
            #expect(report == nil)
            #expect(try Data(contentsOf: storage.fileURL) == before, "a refused writeID wrote something")
            #expect(logger.messages.filter { $0.contains("invalidWriteID") }.count >= 10)

            // At the limit, and empty, are fine.
            try storage.storeOrThrow(3, forKey: "a", writeID: atLimit)
            try storage.storeOrThrow(4, forKey: "a", writeID: "")
            #expect(storage.integer(forKey: "a") == 4)
        }
    }

    /// Issue 9, item 2: `bulkStore` takes `[Key: (any Codable)?]`; `nil`, also a `nil` inside an
    /// `any Codable`, removes the key in the same commit; literals still compile.
    @Test func bulkStoreTakesOptionalValuesAndNilRemovesTheKeyInTheSameCommit() async throws {
        try await withCompatStore { storage, directory throws in
            let notifications = CompatNotifications(storage)
            storage.store("old", forKey: "gone")
            storage.store("old", forKey: "alsoGone")
            storage.store("kept", forKey: "kept")
            let missing: Int? = nil
            let items: [String: (any Codable)?] = [
                "gone": nil, "alsoGone": missing as (any Codable)?, "new": 1, "name": "Ada", "absent": nil,
            ]
            let size = try committedLength(storage.fileURL)
            storage.bulkStore(items: items, writeID: "one commit")
            #expect(!storage.contains("gone"))
            #expect(!storage.contains("alsoGone"))
            #expect(storage.integer(forKey: "new") == 1)
            #expect(storage.retrieve(type: String.self, forKey: "kept") == "kept")
            #expect(
                notifications.wait(forCount: 4).dropFirst(3)
                    == [.init(keys: ["alsoGone", "gone", "name", "new"], writeID: "one commit")])
            #expect(try committedLength(storage.fileURL) > size)

            // Literals, with and without nil; skipKeyIfAlreadyPresent leaves present keys alone,
            // removals included, as the original does.
            storage.bulkStore(items: ["x": 1, "y": "two", "z": nil])
            storage.bulkStore(items: ["new": nil, "fresh": 2], skipKeyIfAlreadyPresent: true)
            #expect(storage.integer(forKey: "new") == 1)
            #expect(storage.integer(forKey: "fresh") == 2)
            let reopened = TinyStorage(insideDirectory: directory, name: "unit")
            #expect(Set(reopened.allKeys.map(\.rawValue)) == ["kept", "new", "name", "x", "y", "fresh"])
        }
    }

    /// Issue 9, item 6: `@TinyStorageItem` accepts a `Codable` type that is not `Sendable`, such
    /// as a class; it is decoded on every read, so two reads never share an instance.
    @Test @MainActor func tinyStorageItemAcceptsANonSendableCodableClass() throws {
        final class Preferences: Codable {
            var theme: String
            var fontSize: Int
            init(theme: String, fontSize: Int) {
                self.theme = theme
                self.fontSize = fontSize
            }
        }
        try withTemporaryDirectory { directory throws in
            let storage = TinyStorage(insideDirectory: directory, name: "unit", logger: CompatLogger())
            @TinyStorageItem(wrappedValue: Preferences(theme: "light", fontSize: 12), "preferences", storage: storage)
            var preferences: Preferences
            #expect(preferences.theme == "light")
            #expect(!storage.contains("preferences"))

            preferences = Preferences(theme: "dark", fontSize: 14)
            let first = preferences
            let second = preferences
            #expect(first !== second)
            #expect((first.theme, second.fontSize) == ("dark", 14))
            first.theme = "changed locally"
            #expect(preferences.theme == "dark")
            #expect(
                TinyStorage(insideDirectory: directory, name: "unit").retrieve(
                    type: Preferences.self, forKey: "preferences")?.fontSize == 14)
        }
    }

    /// Issue 9, item 5: a logger written for 2.x — a class with mutable state, not `Sendable`,
    /// switching over the eight levels — conforms as it is, and hears TinyStorage's call sites.
    @Test func aLoggerWrittenForTheOriginalLibraryConformsAndHearsTheCallSites() async throws {
        func describe(_ level: TinyStorageLogLevel) -> String {
            switch level {
            case .debug: "debug"
            case .info: "info"
            case .warning: "warning"
            case .error: "error"
            case .fault: "fault"
            case .critical: "critical"
            case .trace: "trace"
            case .notice: "notice"
            }
        }
        #expect(TinyStorageLogLevel.allCases.map(describe).count == 8)
        let logger = CompatLogger()
        try await withCompatStore(logger: logger) { storage, _ throws in
            storage.store(Double.nan, forKey: "ratio")
            _ = storage.retrieve(type: Int.self, forKey: "")
            #expect(logger.messages.count >= 2)
            for site in logger.sites {
                #expect(site.file.hasPrefix("TinyStorage/"), "\(site)")
                #expect(!site.function.isEmpty && site.line > 0, "\(site)")
            }
        }
        let swiftLog: any TinyStorageLogging = SwiftLogTinyStorageLogger()
        swiftLog.log(.notice, "a message", file: #fileID, function: #function, line: #line)
    }

    /// Issue 9, item 8: `storeOrThrow` rethrows the error the value's `encode(to:)` threw, as 2.x
    /// does; our own APIs (typed keys, bulkStoreOrThrow, update) keep `TinyStorageError`.
    @Test func storeOrThrowRethrowsTheEncodersOwnErrorAndOurAPIsKeepTypedErrors() async throws {
        enum ProfileError: Error { case incomplete }
        struct Incomplete: Codable {
            init() {}
            init(from decoder: any Decoder) throws { throw ProfileError.incomplete }
            func encode(to encoder: any Encoder) throws { throw ProfileError.incomplete }
        }
        enum Fields: String, TinyStorageKeyGroup { case profile }
        try await withCompatStore { storage, _ throws in
            do {
                try storage.storeOrThrow(Incomplete(), forKey: "profile")
                Issue.record("nothing was thrown")
            } catch ProfileError.incomplete {
                // As in 2.x: the app catches its own error type.
            }
            #expect(throws: ProfileError.incomplete) {
                try storage.group(Fields.self).storeOrThrow(Incomplete(), forKey: .profile)
            }
            #expect(throws: EncodingError.self) { try storage.storeOrThrow(Double.nan, forKey: "ratio") }
            // Other failures are TinyStorageError there too.
            #expect(throws: TinyStorageError.self) { try storage.storeOrThrow(1, forKey: "") }

            let bulk = #expect(throws: TinyStorageError.self) {
                try storage.bulkStoreOrThrow(items: ["profile": Incomplete()])
            }
            #expect(bulk?.code == .encodingFailed)
            #expect(bulk?.underlying is ProfileError)
            let update = #expect(throws: TinyStorageError.self) {
                try storage.update("profile", as: Incomplete.self) { $0 = Incomplete() }
            }
            #expect(update?.code == .encodingFailed)
            #expect(!storage.contains("profile"))
        }
    }

    /// The divergences MigratingFromTinyStorage.md documents, where our guarantees win.
    @Test func theDocumentedDivergencesHold() async throws {
        try await withCompatStore { storage, directory throws in
            storage.store("hello", forKey: "phrase")
            // `reset()` writes a "clear everything" commit; it does not delete the file.
            storage.reset()
            #expect(FileManager.default.fileExists(atPath: storage.fileURL.path))
            #expect(storage.allKeys.isEmpty)
            // `fileURL` names our log, not a property list.
            #expect(storage.fileURL.lastPathComponent == "store.tinystorage")
            let bytes = try Data(contentsOf: storage.fileURL)
            #expect(throws: (any Error).self) { try PropertyListSerialization.propertyList(from: bytes, format: nil) }
            // A damaged file makes the store unavailable, never empty, and nothing overwrites it.
            storage.store("hello", forKey: "phrase")
            try Data("junk".utf8).write(to: storage.fileURL)
            let reopened = TinyStorage(insideDirectory: directory, name: "unit", logger: CompatLogger())
            #expect(!reopened.availability.isAvailable)
            #expect(throws: TinyStorageError.self) { try reopened.retrieveOrThrow(type: String.self, forKey: "phrase") }
            reopened.store("new", forKey: "phrase")
            #expect(try Data(contentsOf: storage.fileURL) == Data("junk".utf8))
        }
    }
}

/// The `userInfo` a notification observer saw, collected across threads.
private final class CollectedUserInfo: @unchecked Sendable {
    // @unchecked: `received` is only touched under `condition`.
    private let condition = NSCondition()
    private var received: [(keys: [String]?, writeID: String?)] = []

    func append(keys: [String]?, writeID: String?) {
        condition.withLock {
            received.append((keys, writeID))
            condition.broadcast()
        }
    }

    /// What arrived, once `count` notifications have (or after 30 s: a hang guard, not a timing check).
    func wait(forCount count: Int) -> [(keys: [String]?, writeID: String?)] {
        condition.withLock {
            let deadline = Date().addingTimeInterval(30)
            while received.count < count, condition.wait(until: deadline) {}
            return received
        }
    }
}
