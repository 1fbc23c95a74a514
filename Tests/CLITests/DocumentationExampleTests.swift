import Foundation
import Testing
import TinyStorage
import TinyStorageTesting

// The examples of the DocC articles in Sources/TinyStorage/Documentation.docc, run (with stores in
// temporary directories or in memory): what they claim to do, they do. Their text is compiled as
// printed by DocumentationSnippetTests; these are copies, to run.

extension TinyStorage.Key where Value == Int {
    static var streak: Self { .init("streak", default: 0) }
}

extension TinyStorage.Key where Value == String? {
    static var lastUser: Self { .init("lastUser") }  // default: nil
}

@Suite struct DocumentationExampleTests {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("tinystorage-docs-\(UUID().uuidString)", isDirectory: true)

    func removeDirectory() { try? FileManager.default.removeItem(at: directory) }

    struct Profile: Codable, Sendable, Equatable {
        var name: String
        var age: Int
    }

    // MARK: GettingStarted.md

    @Test func gettingStarted() async throws {
        defer { removeDirectory() }
        let storage = TinyStorage(insideDirectory: directory, name: "settings")

        storage.store(365, forKey: "streak")
        storage.store(Profile(name: "Ada", age: 36), forKey: "profile")
        #expect(storage.retrieve(type: Int.self, forKey: "streak") == 365)
        #expect(storage.retrieve(type: Profile.self, forKey: "profile") == Profile(name: "Ada", age: 36))
        storage.remove(key: "profile")
        #expect(!storage.contains("profile"))

        do {
            let streak = try storage.retrieveOrThrow(type: Int.self, forKey: "streak") ?? 0
            storage.store(streak + 1, forKey: "streak")
        } catch TinyStorageError.Code.unavailable {
            Issue.record("the store is available")
        }
        #expect(storage[.streak] == 366)

        storage[.streak] = 10
        #expect(storage[.streak] == 10)
        #expect(try storage.value(for: .streak) == 10)
        #expect(storage[.lastUser] == nil)

        try storage.update(.streak) { streak in streak += 1 }
        storage.incrementInteger(forKey: "launches")
        #expect(storage[.streak] == 11)
        #expect(storage.retrieve(type: Int.self, forKey: "launches") == 1)

        for await streak in storage.values(forKey: "streak", as: Int.self) {
            #expect(streak == 11)
            break
        }
    }

    enum Onboarding: String, TinyStorageKeyGroup, CaseIterable {
        case welcome, notifications, firstStreak
    }

    @Test func gettingStartedKeyGroups() throws {
        let storage = TinyStorage.inMemory()
        storage.store("kept", forKey: "Onboarding.welcomeOld")

        let onboarding = storage.group(Onboarding.self)
        onboarding.store(true, forKey: .firstStreak)
        onboarding.store(true, forKey: .welcome)

        let seen = onboarding.storedKeys
        #expect(seen == [.welcome, .firstStreak])
        try onboarding.resetOrThrow()
        #expect(onboarding.storedKeys.isEmpty)
        #expect(storage.allKeys.map(\.rawValue) == ["Onboarding.welcomeOld"])
    }

    // MARK: MultipleProcesses.md

    @Test func multipleProcesses() async throws {
        let storage = TinyStorage.inMemory()
        try storage.update(.streak) { streak in streak += 1 }
        storage.incrementInteger(forKey: "launches")
        try storage.update("visits", as: [String].self) { visits in
            visits = (visits ?? []) + ["2026-11-22"]
        }
        #expect(storage.retrieve(type: [String].self, forKey: "visits") == ["2026-11-22"])

        let mine = "settings-screen"
        let seen = CollectedWriteIDs()
        let observer = NotificationCenter.default.addObserver(
            forName: TinyStorage.didChangeNotification, object: storage, queue: .main
        ) { notification in
            let writer = notification.userInfo?[TinyStorage.writeIDUserInfoKey] as? String
            let keys = notification.userInfo?[TinyStorage.changedKeysUserInfoKey] as? [String] ?? []
            if keys == ["onboarded"] { seen.append(writer) }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        storage.store(true, forKey: "onboarded", writeID: mine)
        #expect(seen.wait(forCount: 1) == [mine])

        let support = directory
        defer { removeDirectory() }
        let shared = TinyStorage(
            insideDirectory: support, name: "shared", notificationQueue: DispatchQueue(label: "changes"))
        var changes = shared.values(forKey: "onboarded", as: Bool.self).makeAsyncIterator()
        #expect(await changes.next() == .some(nil))
        shared.store(true, forKey: "onboarded")
        #expect(await changes.next() == true)
    }

    // MARK: MigratingFromUserDefaults.md

    func migrateIfNeeded(_ storage: TinyStorage, from defaults: UserDefaults) -> String {
        guard !storage.contains("migratedFromUserDefaults") else { return "already" }
        do {
            let report = try storage.migrate(
                userDefaults: defaults, nonBoolKeys: ["streak", "lastOpened", "favorites"],
                boolKeys: ["onboarded"], requiring: "hasLaunchedBefore")
            storage.store(true, forKey: "migratedFromUserDefaults")
            if !report.isComplete { return "incomplete: \(report.failed)" }
            return "migrated \(report.migrated.sorted())"
        } catch TinyStorageError.Code.migrationRefused {
            return "refused"
        } catch {
            return "failed: \(error)"
        }
    }

    @Test func migratingFromUserDefaults() throws {
        let suite = "tinystorage-docs-\(UUID().uuidString)"
        let defaults = try #require(UserDefaults(suiteName: suite))
        defer { defaults.removePersistentDomain(forName: suite) }
        let storage = TinyStorage.inMemory()

        #expect(migrateIfNeeded(storage, from: defaults) == "refused")
        defaults.set(364, forKey: "streak")
        defaults.set(true, forKey: "onboarded")
        defaults.set(["a", "b"], forKey: "favorites")
        defaults.set(true, forKey: "hasLaunchedBefore")
        #expect(migrateIfNeeded(storage, from: defaults) == "migrated [\"favorites\", \"onboarded\", \"streak\"]")
        #expect(migrateIfNeeded(storage, from: defaults) == "already")
        #expect(storage.retrieve(type: Int.self, forKey: "streak") == 364)
        #expect(storage.retrieve(type: Bool.self, forKey: "onboarded") == true)
        #expect(storage.retrieve(type: [String].self, forKey: "favorites") == ["a", "b"])

        let other = TinyStorage.inMemory()
        let report = other.migrate(
            userDefaults: defaults, nonBoolKeys: ["streak"], boolKeys: ["onboarded"],
            overwriteTinyStorageIfConflict: false)
        #expect(report?.migrated.sorted() == ["onboarded", "streak"])
    }

    // MARK: MigratingFromTinyStorage.md

    @Test func migratingFromTinyStorage() throws {
        defer { removeDirectory() }
        // What the original library left behind: a binary plist of key to JSON bytes.
        let folder = directory.appendingPathComponent("settings", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let original: [String: Data] = ["streak": Data("364".utf8), "name": Data(#""Ada""#.utf8)]
        let plist = try PropertyListSerialization.data(fromPropertyList: original, format: .binary, options: 0)
        let plistURL = folder.appendingPathComponent("tiny-storage.plist")
        try plist.write(to: plistURL)

        let storage = TinyStorage(insideDirectory: directory, name: "settings")
        let streak = storage.retrieve(type: Int.self, forKey: "streak")
        #expect(streak == 364)
        #expect(storage.retrieve(type: String.self, forKey: "name") == "Ada")
        #expect(try Data(contentsOf: plistURL) == plist, "the plist is left untouched")
    }

    // MARK: StoreFiles.md

    @Test func aPlantedLinkMakesTheStoreUnavailableWithUnsafeFile() throws {
        defer { removeDirectory() }
        let folder = directory.appendingPathComponent("settings", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let target = directory.appendingPathComponent("someone-elses-file")
        try FileManager.default.createSymbolicLink(
            at: folder.appendingPathComponent("store.lock"), withDestinationURL: target)

        let storage = TinyStorage(insideDirectory: directory, name: "settings", logger: QuietLogger())
        var printed: String?
        if case .unavailable(let error) = storage.availability, error.code == .unsafeFile {
            // Someone could have planted what is there: tell a person, do not work around it.
            printed = error.message
        }
        #expect(printed?.contains("'\(folder.path)/store.lock' is a symbolic link") == true)
        #expect(!FileManager.default.fileExists(atPath: target.path), "the link was not followed")
    }

    // MARK: Testing.md

    @Test(.isolatedStore) func completingADayExtendsTheStreak() throws {
        let storage = TinyStorage.testStore
        #expect(storage.allKeys.isEmpty)
        storage.store(364, forKey: "streak")
        try storage.update("streak", as: Int.self) { streak in streak = (streak ?? 0) + 1 }
        #expect(storage.retrieve(type: Int.self, forKey: "streak") == 365)
    }

    @Suite(.isolatedStore(name: "settings", seed: { storage in try storage.storeOrThrow(364, forKey: "streak") }))
    struct LaunchTests {
        let storage = TinyStorage.testStore

        @Test func aLaunchKeepsTheStreak() throws {
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
            #expect(storage.fileURL.path.hasPrefix(TinyStorage.testStoreDirectory.path + "/settings/"))
        }

        @Test(arguments: [1, 7, 30])
        func daysAddUp(days: Int) throws {
            try storage.update("streak", as: Int.self) { streak in streak = (streak ?? 0) + days }
            #expect(storage.integer(forKey: "streak") == 364 + days)
        }
    }

    @Test(.isolatedStore) func theStreakSurvivesARelaunch() throws {
        TinyStorage.testStore.store(365, forKey: "streak")
        let relaunched = TinyStorage(insideDirectory: TinyStorage.testStoreDirectory, name: "store")
        #expect(try relaunched.retrieveOrThrow(type: Int.self, forKey: "streak") == 365)
    }

    @Test func anInMemoryStoreIsItsOwn() {
        let storage = TinyStorage.inMemory()
        storage.store(364, forKey: "streak")
        let streak = storage.retrieve(type: Int.self, forKey: "streak")
        #expect(streak == 364)
        #expect(TinyStorage.inMemory().retrieve(type: Int.self, forKey: "streak") == nil)
    }

    final class RecordingLogger: TinyStorageLogging {
        // NB: TinyStorage calls a logger from its own threads too, so the state is under a lock.
        private let lock = NSLock()
        private var messages: [String] = []

        func log(_ level: TinyStorageLogLevel, _ message: String, file: String, function: String, line: Int) {
            lock.withLock { messages.append(message) }
        }

        var recorded: [String] { lock.withLock { messages } }
    }

    @Test func checkingLoggedErrors() {
        let logger = RecordingLogger()
        let storage = TinyStorage.inMemory(logger: logger)
        storage.store(Double.nan, forKey: "ratio")  // not JSON: refused and logged
        #expect(logger.recorded.contains { $0.contains("encodingFailed") })
        #expect(!storage.contains("ratio"))
    }
}

/// The writeIDs seen by a notification observer, collected across threads.
final class CollectedWriteIDs: @unchecked Sendable {
    // @unchecked: `value` is only touched under `condition`.
    private let condition = NSCondition()
    private var value: [String?] = []

    func append(_ element: String?) {
        condition.withLock {
            value.append(element)
            condition.broadcast()
        }
    }

    /// The collected values once there are `count` of them, or what there is after 30 seconds
    /// (a guard against a hang, not a timing assertion).
    func wait(forCount count: Int) -> [String?] {
        condition.withLock {
            let deadline = Date().addingTimeInterval(30)
            while value.count < count, condition.wait(until: deadline) {}
            return value
        }
    }
}
