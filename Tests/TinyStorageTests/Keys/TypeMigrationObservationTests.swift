import Foundation
import Observation
import Testing

@testable import TinyStorage

/// Issue 13: `@TinyStorageItem`, value streams and Observation see a value stored in an older
/// shape as the key's current type, whoever wrote it; the write-back is announced like any commit.
@Suite struct TypeMigrationObservationTests {
    let changes = DispatchQueue(label: "TypeMigrationObservationTests.changes")
    static let ada = SettingsV3(displayName: "Ada", theme: .dark)

    func openStore(_ directory: URL) -> TinyStorage {
        TinyStorageTests.openStore(directory, notificationQueue: changes)
    }

    /// Waits until `condition` holds, at most 30 seconds (a delivery on another queue).
    static func wait(until condition: () -> Bool) {
        let deadline = Date().addingTimeInterval(30)
        while !condition() && Date() < deadline { sched_yield() }
    }

    @Test func thePropertyWrapperReadsTheUpgradedValueAndWritesItBack() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow(SettingsV1(name: "Ada", dark: true), forKey: "settings")
            let calls = MigrationCalls()
            @TinyStorageItem(calls.settingsKey(), storage: storage) var settings: SettingsV3

            #expect(settings == Self.ada)
            #expect(settings == Self.ada)
            #expect(calls.stepsRun.fromV1 == 1)
            #expect(try storage.rawJSON(forKey: "settings") == storedJSON(Self.ada))
            #expect(storage.typeMigrationReports.map(\.key) == ["settings"])
        }
    }

    @Test func observersOfTheKeySeeTheUpgradedValueWrittenByAnotherInstance() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            @TinyStorageItem(.settingsV3, storage: storage) var settings: SettingsV3
            #expect(settings == SettingsV3())
            let log = AnnouncementLog(storage)
            let invalidations = Locked(0)
            withObservationTracking {
                _ = settings
            } onChange: {
                invalidations.withLock { $0 += 1 }
            }

            // An older version of the app, in another instance, stores its shape.
            openStore(directory).store(SettingsV1(name: "Ada", dark: true), forKey: "settings")
            _ = log.received.wait(forCount: 1)
            // NB: Observation is signalled in the same delivery as the notification, not
            // necessarily before it: wait for it too.
            Self.wait { invalidations.withLock { $0 } >= 1 }
            #expect(invalidations.withLock { $0 } == 1)

            // The re-render reads the upgraded value, and its write-back is announced in turn.
            changes.suspend()  // NB: as in the test below, the write-back is announced after tracking starts
            withObservationTracking {
                #expect(settings == Self.ada)
            } onChange: {
                invalidations.withLock { $0 += 1 }
            }
            changes.resume()
            #expect(log.delivered == [Announcement(["settings"]), Announcement(["settings"])])
            #expect(invalidations.withLock { $0 } == 2)
            #expect(settings == Self.ada)
            #expect(storage.typeMigrationReports.count == 1)
        }
    }

    /// SwiftUI's way in: the read answers the upgraded value, and the write-back, a change to the
    /// key read, re-runs the view once; that run finds the current shape.
    @MainActor @Test func autoUpdatingRetrieveReadsTheUpgradedValueAndSeesItsWriteBack() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow(SettingsV1(name: "Ada", dark: true), forKey: "settings")
            let log = AnnouncementLog(storage)
            let calls = MigrationCalls()
            let key = calls.settingsKey()
            let invalidations = Locked(0)
            // NB: the write-back is committed inside the tracked read, and Observation installs
            // its observers only once the read returns: delivered on a queue of its own (here),
            // the announcement could come in between and find no observer (harmless: the read
            // answered the value written back). SwiftUI announces on the main queue, where the
            // view's body runs, so it cannot; here the queue is held until tracking is installed.
            changes.suspend()
            withObservationTracking {
                #expect(storage.autoUpdatingRetrieve(type: SettingsV3.self, forKey: key) == Self.ada)
            } onChange: {
                invalidations.withLock { $0 += 1 }
            }
            changes.resume()
            // NB: Observation is signalled in the same delivery as the notification.
            #expect(log.delivered == [Announcement(["settings"])])
            #expect(invalidations.withLock { $0 } == 1)

            withObservationTracking {
                #expect(storage.autoUpdatingRetrieve(type: SettingsV3.self, forKey: key) == Self.ada)
            } onChange: {
                invalidations.withLock { $0 += 1 }
            }
            #expect(calls.stepsRun.fromV1 == 1)
            #expect(log.delivered == [Announcement(["settings"])])
            #expect(invalidations.withLock { $0 } == 1)
        }
    }

    @Test func aStreamYieldsOlderValuesAsTheCurrentType() async throws {
        try await withScratchDirectory { directory in
            let storage = openStore(directory)
            try storage.storeOrThrow(SettingsV1(name: "Ada", dark: true), forKey: "settings")
            let stream = storage.values(forKey: TinyStorage.Key<SettingsV3>.settingsV3, as: SettingsV3.self)
            let other = openStore(directory)
            try other.storeOrThrow(SettingsV2(name: "Grace", theme: "light"), forKey: "settings")
            try other.storeOrThrow(SettingsV3(displayName: "Lin", theme: .system, fontSize: 18), forKey: "settings")
            other.remove(key: "settings")
            let values = await collect(stream, count: 4)
            #expect(
                values == [
                    Self.ada, SettingsV3(displayName: "Grace", theme: .light),
                    SettingsV3(displayName: "Lin", theme: .system, fontSize: 18), nil,
                ])
        }
    }
}
