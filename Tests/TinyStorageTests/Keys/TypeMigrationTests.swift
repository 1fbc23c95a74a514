import Foundation
import Testing

@testable import TinyStorage

/// Issue 13: a typed key declares the older shapes of its value; a read upgrades a value stored
/// in one of them and writes it back once, compare-and-commit; bytes no type decodes are never
/// touched, and the error says where each type failed.
@Suite struct TypeMigrationTests {
    let changes = DispatchQueue(label: "TypeMigrationTests.changes")
    static let ada = SettingsV3(displayName: "Ada", theme: .dark)

    func openStore(_ directory: URL, logger: TestLogger = TestLogger()) -> TinyStorage {
        TinyStorageTests.openStore(directory, notificationQueue: changes, logger: logger)
    }

    @Test(arguments: [
        #"{"dark":true,"name":"Ada"}"#,  // version 1, as TinyStorage stores it
        #"{"name":"Ada","theme":"dark"}"#,  // version 2
        #"{ "name": "Ada", "dark": true }"#,  // version 1 as another encoder wrote it
    ])
    func anOlderValueIsReadAsTheCurrentTypeAndWrittenBackOnce(json: String) throws {
        let stored = Data(json.utf8)
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let calls = MigrationCalls()
            let key = calls.settingsKey()
            try storage.storeRawJSON(["settings": stored])
            let announcements = AnnouncementLog(storage)

            #expect(storage[key] == Self.ada)
            #expect(try storage.value(for: key) == Self.ada)
            #expect(storage.retrieve(type: SettingsV3.self, forKey: key) == Self.ada)
            #expect(try storage.retrieveOrThrow(type: SettingsV3.self, forKey: key) == Self.ada)

            #expect(try storage.rawJSON(forKey: "settings") == storedJSON(Self.ada))
            let steps = calls.stepsRun
            #expect(steps.fromV1 + steps.fromV2 == 1)
            #expect(announcements.delivered == [Announcement(["settings"])])
            let reports = storage.typeMigrationReports
            #expect(reports.map(\.key) == ["settings"])
            #expect(reports.map(\.toType) == ["SettingsV3"])
            #expect(reports.first?.fromType == (steps.fromV1 == 1 ? "SettingsV1" : "SettingsV2"))

            // Another instance (another launch) finds the current shape and upgrades nothing.
            let reopened = openStore(directory)
            #expect(reopened[key] == Self.ada)
            #expect(reopened.typeMigrationReports.isEmpty)
            #expect(calls.stepsRun == steps)
        }
    }

    @Test func concurrentReadersWriteTheUpgradeBackOnce() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow(SettingsV1(name: "Ada", dark: true), forKey: "settings")
            let announcements = AnnouncementLog(storage)
            let key = TinyStorage.Key<SettingsV3>.settingsV3
            let wrong = Locked(0)
            DispatchQueue.concurrentPerform(iterations: 8) { _ in
                if storage[key] != Self.ada { wrong.withLock { $0 += 1 } }
            }
            #expect(wrong.withLock { $0 } == 0)
            #expect(storage.typeMigrationReports.count == 1)
            #expect(announcements.delivered == [Announcement(["settings"])])
            #expect(try storage.rawJSON(forKey: "settings") == storedJSON(Self.ada))
        }
    }

    @Test func updateCommitsTheUpgradedValueWithItsChangesInOneCommit() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow(SettingsV1(name: "Ada", dark: true), forKey: "settings")
            let announcements = AnnouncementLog(storage)
            let seen = try storage.update(.settingsV3) { settings in
                settings.fontSize = 20
                return settings.displayName
            }
            #expect(seen == "Ada")
            var expected = Self.ada
            expected.fontSize = 20
            #expect(try storage.rawJSON(forKey: "settings") == storedJSON(expected))
            #expect(announcements.delivered == [Announcement(["settings"])])
            #expect(storage.typeMigrationReports.map(\.fromType) == ["SettingsV1"])
        }
    }

    @Test func undecodableBytesSurviveAnyNumberOfReads() async throws {
        try await withScratchDirectory { directory in
            let logger = TestLogger()
            let storage = openStore(directory, logger: logger)
            let stored = Data(#"{"theme":5}"#.utf8)
            try storage.storeRawJSON(["settings": stored])
            let records = try storedRecords(storage.fileURL)
            let announcements = AnnouncementLog(storage)
            let key = TinyStorage.Key<SettingsV3>.settingsV3

            for _ in 0..<5 {
                #expect(storage[key] == SettingsV3())
                #expect(storage.retrieve(type: SettingsV3.self, forKey: key) == nil)
                expectError(.decodingFailed) { try storage.value(for: key) }
                expectError(.decodingFailed) { try storage.retrieveOrThrow(type: SettingsV3.self, forKey: key) }
                expectError(.decodingFailed) { try storage.update(key) { _ in Issue.record("body ran") } }
            }
            // A stream skips it, and yields the next value that decodes.
            let stream = storage.values(forKey: key, as: SettingsV3.self)
            try storage.storeOrThrow(SettingsV2(name: "Ada", theme: "dark"), forKey: "other")
            try storage.storeRawJSON(["settings": stored])  // the same bytes: no change
            #expect(try storage.rawJSON(forKey: "settings") == stored)
            #expect(announcements.delivered == [Announcement(["other"])])
            try storage.storeOrThrow(SettingsV1(name: "Ada", dark: true), forKey: "settings")
            #expect(await collect(stream, count: 1) == [Self.ada])

            #expect(try storedRecords(storage.fileURL).prefix(records.count) == records)
            #expect(storage.typeMigrationReports.isEmpty)
            #expect(
                logger.texts(atLeast: .error).contains { $0.contains("SettingsV3 (settings.displayName: missing)") })
        }
    }

    @Test func decodingErrorsNameEveryTypeTriedAndWhereEachFailed() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeRawJSON([
                "settings": Data(#"{"displayName":"Ada","fontSize":12,"theme":5}"#.utf8),
                "list": Data(#"[1,"two"]"#.utf8),
                "nested": Data(#"{"inner":{"b":null}}"#.utf8),
            ])
            let error = expectError(.decodingFailed) { try storage.value(for: .settingsV3) }
            #expect(error?.key == "settings")
            #expect(
                error?.message.contains(
                    "could not be decoded as SettingsV3 (settings.theme: expected String, found number), nor as the "
                        + "older types the key migrates from: SettingsV2 (settings.name: missing), "
                        + "SettingsV1 (settings.name: missing)") == true, "\(error.map(\.message) ?? "")")
            #expect(error?.underlying is DecodingError)

            // Keys without older shapes, and names without a type, say where too.
            let list = expectError(.decodingFailed) { try storage.retrieveOrThrow(type: [Int].self, forKey: "list") }
            #expect(list?.message.contains("Array<Int> (list[1]: expected Int, found string)") == true)
            struct Nested: Codable {
                struct Inner: Codable {
                    var a: Int
                    var b: String
                }
                var inner: Inner
            }
            let nested = expectError(.decodingFailed) {
                try storage.update("nested", as: Nested.self) { _ in Issue.record("body ran") }
            }
            #expect(nested?.message.contains("nested.inner.a: missing") == true, "\(nested.map(\.message) ?? "")")
            let root = expectError(.decodingFailed) { try storage.retrieveOrThrow(type: Int.self, forKey: "nested") }
            #expect(root?.message.contains("(nested: expected Int, found object)") == true)
        }
    }

    @Test func aMigrationThatThrowsGivesATypedErrorAndChangesNothing() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow(SettingsV1(name: "Ada", dark: true), forKey: "settings")
            let records = try storedRecords(storage.fileURL)
            let announcements = AnnouncementLog(storage)
            let calls = MigrationCalls()
            calls.refuseV1.withLock { $0 = true }
            let key = calls.settingsKey()

            let error = expectError(.decodingFailed) { try storage.value(for: key) }
            #expect(error?.underlying as? MigrationCalls.Refused == MigrationCalls.Refused())
            #expect(error?.message.contains("decoded as SettingsV1, but its migration to SettingsV3 threw") == true)
            #expect(storage[key] == SettingsV3())
            expectError(.decodingFailed) { try storage.update(key) { _ in Issue.record("body ran") } }

            #expect(try storedRecords(storage.fileURL) == records)
            #expect(announcements.delivered.isEmpty)
            #expect(storage.typeMigrationReports.isEmpty)
        }
    }

    @Test func aFailedWriteBackDoesNotFailTheReadAndTheNextReadUpgradesAgain() throws {
        try withTemporaryDirectory { directory throws in
            let faults = FaultSwitch()
            let logger = TestLogger()
            // NB: appends by `pwrite` (Apple platforms' path), which a fault can fail after the
            // file is open; Linux's copy into a mapping fails only when making room.
            let storage = TinyStorageTests.openStore(
                directory, io: faults.io, logger: logger, options: Engine.Options(usesFileLock: true))
            try storage.storeOrThrow(SettingsV1(name: "Ada", dark: true), forKey: "settings")
            let records = try storedRecords(storage.fileURL)
            let calls = MigrationCalls()
            let key = calls.settingsKey()

            faults.inject(.fail(.noSpace), into: .write)
            #expect(try storage.value(for: key) == Self.ada)
            #expect(try storedRecords(storage.fileURL) == records)
            #expect(storage.typeMigrationReports.isEmpty)
            #expect(logger.texts(atLeast: .warning).contains { $0.contains("could not be written back") })

            faults.clear()
            #expect(storage[key] == Self.ada)
            #expect(calls.stepsRun.fromV1 == 2)
            #expect(try storage.rawJSON(forKey: "settings") == storedJSON(Self.ada))
            #expect(storage.typeMigrationReports.count == 1)
        }
    }

    /// A repair that found durable data damaged reports it once, by the first throwing read (issue
    /// 11): a read of a key that declares older shapes is such a read, whether or not a
    /// non-throwing read upgraded the value first.
    @Test(arguments: [false, true])
    func theFirstThrowingReadOfAMigratingKeyReportsADataLoss(upgradedFirst: Bool) throws {
        try withTemporaryDirectory { parent throws in
            let original = TinyStorageTests.openStore(parent, name: "original")
            try original.storeOrThrow(SettingsV1(name: "Ada", dark: true), forKey: "settings")
            let start = try committedLength(original.fileURL)
            try original.storeOrThrow(1, forKey: "other")
            let end = try committedLength(original.fileURL)
            try original.synchronize()
            var damaged = try Data(contentsOf: original.fileURL)
            damaged[(start + end) / 2] ^= 0x04  // in the record of "other", before the durable mark
            let folder = parent.appendingPathComponent("damaged", isDirectory: true)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
            try damaged.write(to: folder.appendingPathComponent("store.tinystorage"))
            let storage = TinyStorageTests.openStore(parent, name: "damaged")
            let key = TinyStorage.Key<SettingsV3>.settingsV3

            if upgradedFirst {
                #expect(storage[key] == Self.ada)  // upgrades and writes back; reports nothing
                #expect(storage[key] == Self.ada)  // the current shape now, decoded and cached
            }
            let error = expectError(.corrupted) { try storage.value(for: key) }
            #expect(error?.message.contains("known to be on stable storage") == true, "\(String(describing: error))")
            #expect(try storage.value(for: key) == Self.ada, "reported once")
            #expect(try storage.rawJSON() == ["settings": storedJSON(Self.ada)])
            #expect(storage.typeMigrationReports.count == 1)
            #expect(storage.recoveryReports.map(\.isDataLoss) == [true])
        }
    }

    @Test func reportsAreLoggedAndKeepTheMostRecentOnly() throws {
        let logger = TestLogger()
        let storage = TinyStorage.inMemory(logger: logger)
        let key = TinyStorage.Key<SettingsV3>.settingsV3
        let limit = TinyStorage.maximumTypeMigrationReports
        for round in 0...limit {
            try storage.storeOrThrow(SettingsV1(name: "\(round)", dark: false), forKey: "settings")
            #expect(storage[key].displayName == "\(round)")
        }
        let reports = storage.typeMigrationReports
        #expect(reports.count == limit)
        #expect(reports.allSatisfy { $0.key == "settings" && $0.fromType == "SettingsV1" })
        #expect(reports.map(\.date) == reports.map(\.date).sorted())
        #expect(
            logger.messages.withLock { $0 }.filter { $0.level == .info && $0.text.contains(#"Upgraded "settings""#) }
                .count == limit + 1)
    }

    /// Past the older shape a key keeps inline, the others are tried too, in order.
    @Test func aKeyTriesEveryOlderShapeItDeclaresInTheOrderDeclared() {
        let storage = TinyStorage.inMemory()
        let key = TinyStorage.Key<SettingsV3>.settingsV3.migrating(from: String.self) { SettingsV3(displayName: $0) }
        #expect(key.migrations.all.map(\.olderTypeName) == ["SettingsV2", "SettingsV1", "String"])

        storage.store("Ada", forKey: "settings")  // release 0 stored a name alone
        #expect(storage[key] == SettingsV3(displayName: "Ada"))
        #expect(storage.typeMigrationReports.map(\.fromType) == ["String"])

        storage.store(5, forKey: "settings")
        let error = expectError(.decodingFailed) { try storage.value(for: key) }
        #expect(
            error?.message.contains(
                "nor as the older types the key migrates from: SettingsV2 (settings: expected object, found number), "
                    + "SettingsV1 (settings: expected object, found number), "
                    + "String (settings: expected String, found number)") == true, "\(error.map(\.message) ?? "")")
    }

    @Test func keysThatDeclareOlderShapesAreEqualByNameOnly() {
        let plain = TinyStorage.Key("settings", default: SettingsV3())
        #expect(plain == .settingsV3)
        #expect(Set([plain, .settingsV3]).count == 1)
        #expect(TinyStorage.Key<SettingsV3>.settingsV3.rawValue == "settings")
        #expect(
            TinyStorage.Key<SettingsV3>.settingsV3.migrations.all.map(\.olderTypeName) == ["SettingsV2", "SettingsV1"])
    }
}
