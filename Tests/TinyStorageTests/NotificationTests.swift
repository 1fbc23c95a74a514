import Foundation
import Testing

@testable import TinyStorage

/// G6, local and same-process parts: every change is announced once, with its keys and writeID;
/// writes that change no bytes announce nothing.
///
/// Notifications are posted from a background queue shortly after each commit; the tests wait for
/// that queue to drain (`waitUntilDelivered()`) before looking, never for a length of time.
@Suite struct NotificationTests {
    struct Announcement: Equatable, Sendable {
        var keys: Set<String>
        var writeID: String?
    }

    /// Records `didChangeNotification`s posted by `storage` until `body` returns.
    func recordingAnnouncements(
        of storage: TinyStorage, _ body: (_ announcements: () -> [Announcement]) throws -> Void
    ) rethrows {
        // Announcements of earlier commits must not be mistaken for those of `body`.
        storage.engine.delivery.waitUntilDelivered()
        let received = Locked<[Announcement]>([])
        let observer = NotificationCenter.default.addObserver(
            forName: TinyStorage.didChangeNotification, object: storage, queue: nil
        ) { notification in
            let keys = notification.userInfo?[TinyStorage.changedKeysUserInfoKey] as? [String]
            let writeID = notification.userInfo?[TinyStorage.writeIDUserInfoKey] as? String
            received.withLock { $0.append(Announcement(keys: Set(keys ?? ["<missing keys>"]), writeID: writeID)) }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        try body {
            storage.engine.delivery.waitUntilDelivered()
            return received.withLock { $0 }
        }
    }

    @Test func localChangesAreAnnouncedOnceEachWithKeysAndWriteID() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let writeID = UUID().uuidString
            recordingAnnouncements(of: storage) { announcements in
                storage.store(1, forKey: "a", writeID: writeID)
                #expect(announcements() == [Announcement(keys: ["a"], writeID: writeID)])

                storage.store(2, forKey: "a")
                #expect(announcements().last == Announcement(keys: ["a"], writeID: nil))

                storage.incrementInteger(forKey: "a", writeID: writeID)
                #expect(announcements().last == Announcement(keys: ["a"], writeID: writeID))

                storage.bulkStore(items: ["b": 1, "c": 2, "a": 4])
                #expect(announcements().last == Announcement(keys: ["a", "b", "c"], writeID: nil))

                storage.remove(key: "b", writeID: writeID)
                #expect(announcements().last == Announcement(keys: ["b"], writeID: writeID))

                storage.reset(writeID: writeID)
                #expect(announcements().last == Announcement(keys: ["a", "c"], writeID: writeID))
                #expect(announcements().count == 6)
            }
        }
    }

    @Test func writesThatChangeNoBytesAnnounceNothing() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.store(1, forKey: "a")
            storage.store(["k": [1, 2]], forKey: "dict")
            recordingAnnouncements(of: storage) { announcements in
                storage.store(1, forKey: "a")
                storage.store(["k": [1, 2]], forKey: "dict")
                storage.remove(key: "missing")
                storage.incrementInteger(forKey: "a", by: 0)
                storage.bulkStore(items: ["a": 1])
                storage.bulkStore(items: ["a": 99], skipKeyIfAlreadyPresent: true)
                storage.store(Double.nan, forKey: "refused")
                storage.reset()
                storage.reset()
                storage.store(nil, forKey: "a")
                #expect(announcements() == [Announcement(keys: ["a", "dict"], writeID: nil)])
            }
        }
    }

    @Test func onlyTheChangedKeysOfABulkStoreAreAnnounced() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.bulkStore(items: ["a": 1, "b": 2])
            recordingAnnouncements(of: storage) { announcements in
                storage.bulkStore(items: ["a": 1, "b": 3, "c": 4])
                #expect(announcements() == [Announcement(keys: ["b", "c"], writeID: nil)])
            }
        }
    }

    @Test func anotherInstancesCommitIsAnnouncedWithItsWriteID() throws {
        try withTemporaryDirectory { directory throws in
            let writer = openStore(directory)
            let reader = openStore(directory)
            #expect(reader.allKeys.isEmpty)
            let writeID = UUID().uuidString
            let arrived = DispatchSemaphore(value: 0)
            let received = Locked<[Announcement]>([])
            let observer = NotificationCenter.default.addObserver(
                forName: TinyStorage.didChangeNotification, object: reader, queue: nil
            ) { notification in
                let keys = notification.userInfo?[TinyStorage.changedKeysUserInfoKey] as? [String] ?? []
                let writeID = notification.userInfo?[TinyStorage.writeIDUserInfoKey] as? String
                received.withLock { $0.append(Announcement(keys: Set(keys), writeID: writeID)) }
                arrived.signal()
            }
            defer { NotificationCenter.default.removeObserver(observer) }

            writer.store("new", forKey: "shared", writeID: writeID)
            // The reader sees the commit on its next access; the announcement may come from that
            // access or from a change monitor, so wait for it (the timeout only guards a hang).
            #expect(reader.retrieve(type: String.self, forKey: "shared") == "new")
            #expect(arrived.wait(timeout: .now() + 30) == .success)
            #expect(received.withLock { $0 }.first == Announcement(keys: ["shared"], writeID: writeID))
        }
    }
}
