import Foundation
import Observation
import Testing

@testable import TinyStorage

/// Issue 3 item 4: `autoUpdatingRetrieve`, `autoUpdatingRetrieveOrThrow` and `@TinyStorageItem`
/// register per-key Observation access, so a change to one key, local or from another instance,
/// invalidates the readers of that key and no others. Checked with `withObservationTracking`.
///
/// Observation's `onChange` runs on the announcing queue just before the notification of the same
/// change is posted, so once that notification (or `waitUntilDelivered()`) has come, an
/// invalidation that was due has happened.
///
/// NB: these tests run on the main actor (`autoUpdatingRetrieve` is `@MainActor`) and block it
/// while they wait, so their stores announce on a queue of their own; main-queue delivery is
/// covered by the compatibility suite.
@MainActor
@Suite struct ObservationTrackingTests {
    let changes = DispatchQueue(label: "ObservationTrackingTests.changes")

    func openStore(_ directory: URL) -> TinyStorage {
        TinyStorageTests.openStore(directory, notificationQueue: changes)
    }

    /// Counts the invalidations of one `withObservationTracking` run.
    final class Invalidations: Sendable {
        let count = Locked(0)
        var value: Int { count.withLock { $0 } }
    }

    func track(_ read: () -> Void) -> Invalidations {
        let invalidations = Invalidations()
        withObservationTracking(read) { invalidations.count.withLock { $0 += 1 } }
        return invalidations
    }

    @Test func aLocalChangeInvalidatesReadersOfThatKeyOnly() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.store(0, forKey: "a")
            storage.store(0, forKey: "b")
            // NB: announcements are delivered after the commit; a reader that starts before its
            // write's announcement is delivered is invalidated by it, so let them arrive first.
            storage.engine.delivery.waitUntilDelivered()
            let readersOfA = track { _ = storage.autoUpdatingRetrieve(type: Int.self, forKey: "a") }
            let readersOfB = track { _ = try? storage.autoUpdatingRetrieveOrThrow(type: Int.self, forKey: "b") }

            storage.store(1, forKey: "other")
            storage.store(0, forKey: "a")  // same bytes: not a change
            storage.engine.delivery.waitUntilDelivered()
            #expect(readersOfA.value == 0)
            #expect(readersOfB.value == 0)

            storage.store(1, forKey: "a")
            storage.engine.delivery.waitUntilDelivered()
            #expect(readersOfA.value == 1)
            #expect(readersOfB.value == 0)

            storage.bulkStore(items: ["b": 1, "other": 2])
            storage.engine.delivery.waitUntilDelivered()
            #expect(readersOfB.value == 1)
        }
    }

    @Test func removalResetAndUpdateInvalidateReadersOfTheirKeys() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.bulkStore(items: ["a": 1, "b": 2, "c": 3])
            storage.engine.delivery.waitUntilDelivered()
            let readersOfA = track { _ = storage.autoUpdatingRetrieve(type: Int.self, forKey: "a") }
            let readersOfB = track { _ = storage.autoUpdatingRetrieve(type: Int.self, forKey: "b") }
            let readersOfC = track { _ = storage.autoUpdatingRetrieve(type: Int.self, forKey: "c") }
            let readersOfAbsent = track { _ = storage.autoUpdatingRetrieve(type: Int.self, forKey: "absent") }

            storage.remove(key: "a")
            try storage.update("b", as: Int.self) { $0 = 20 }
            storage.engine.delivery.waitUntilDelivered()
            #expect((readersOfA.value, readersOfB.value, readersOfC.value) == (1, 1, 0))

            storage.reset()
            storage.engine.delivery.waitUntilDelivered()
            #expect(readersOfC.value == 1)
            #expect(readersOfAbsent.value == 0)
            storage.store(1, forKey: "absent")
            storage.engine.delivery.waitUntilDelivered()
            #expect(readersOfAbsent.value == 1)
        }
    }

    @Test func anotherInstancesChangeInvalidatesReadersOfThatKeyOnly() throws {
        try withTemporaryDirectory { directory throws in
            let observed = openStore(directory)
            let writer = openStore(directory)
            writer.store(0, forKey: "a")
            // Caught up (by this read) and that change announced before anything is tracked.
            #expect(observed.autoUpdatingRetrieve(type: Int.self, forKey: "a") == 0)
            let log = AnnouncementLog(observed)
            let readersOfA = track { _ = observed.autoUpdatingRetrieve(type: Int.self, forKey: "a") }

            // The Observation mutation comes before the notification of the same change.
            writer.store(1, forKey: "b")
            #expect(log.received.wait(forCount: 1) == [Announcement(["b"])])
            #expect(readersOfA.value == 0)

            writer.store(1, forKey: "a")
            #expect(log.received.wait(forCount: 2).last == Announcement(["a"]))
            #expect(readersOfA.value == 1)
            #expect(observed.autoUpdatingRetrieve(type: Int.self, forKey: "a") == 1)
        }
    }

    /// A model holding one stored property, as an app's view model would.
    struct StreakModel {
        @TinyStorageItem var streak: Int
        @TinyStorageItem var name: String?

        init(storage: TinyStorage) {
            _streak = TinyStorageItem(wrappedValue: 0, "streak", storage: storage)
            _name = TinyStorageItem(wrappedValue: nil, "name", storage: storage)
        }
    }

    @Test func tinyStorageItemIsObservedPerKeyLocallyAndAcrossInstances() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let model = StreakModel(storage: storage)
            let readersOfStreak = track { _ = model.streak }
            let readersOfName = track { _ = model.name }

            model.name = "Ada"
            storage.engine.delivery.waitUntilDelivered()
            #expect(readersOfStreak.value == 0)
            #expect(readersOfName.value == 1)

            model.streak = 5
            storage.engine.delivery.waitUntilDelivered()
            #expect(readersOfStreak.value == 1)
            #expect(model.streak == 5)

            let log = AnnouncementLog(storage)
            let again = track { _ = model.streak }
            openStore(directory).store(6, forKey: "streak")
            _ = log.received.wait(forCount: 1)
            #expect(again.value == 1)
            #expect(model.streak == 6)
        }
    }

    @Test func onChangeMayReadTheStoreAndSeesTheNewValue() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.store(1, forKey: "a")
            storage.engine.delivery.waitUntilDelivered()
            let seen = Arrivals<Int?>()
            withObservationTracking {
                _ = storage.autoUpdatingRetrieve(type: Int.self, forKey: "a")
            } onChange: {
                seen.append(storage.retrieve(type: Int.self, forKey: "a"))
                storage.store(true, forKey: "written from onChange")
            }
            let finished = finishes {
                storage.store(2, forKey: "a")
                _ = seen.wait(forCount: 1)
                storage.engine.delivery.waitUntilDelivered()
            }
            #expect(finished, "reading the store from onChange deadlocked")
            #expect(seen.all == [2])
            #expect(storage.bool(forKey: "written from onChange"))
        }
    }
}
