import Foundation
import Observation
import Testing
import TinyStorage

/// Issue 9, item 7: as in 2.x, `didChangeNotification` is posted and Observation is signalled on
/// the main thread, one notification per commit, in commit order; a process without a main run
/// loop names a queue of its own, and value streams need neither.
@Suite struct OriginalDeliveryTests {
    /// What observers saw, collected on the main actor.
    @MainActor final class MainEvents {
        private(set) var events: [String] = []
        private var waiter: (count: Int, continuation: CheckedContinuation<Void, Never>)?

        func append(_ event: String) {
            events.append(event)
            if let waiter, events.count >= waiter.count {
                self.waiter = nil
                waiter.continuation.resume()
            }
        }

        /// Returns once `count` events arrived.
        func wait(forCount count: Int) async -> [String] {
            if events.count < count {
                await withCheckedContinuation { waiter = (count, $0) }
            }
            return events
        }
    }

    @Test @MainActor func observersWithoutAQueueAndOnChangeRunOnTheMainActorAsIn2x() async throws {
        try await withCompatStore { storage, directory throws in
            let events = MainEvents()
            let plain = NotificationCenter.default.addObserver(
                forName: TinyStorage.didChangeNotification, object: storage, queue: nil
            ) { notification in
                let keys = notification.userInfo?[TinyStorage.changedKeysUserInfoKey] as? [String] ?? []
                let writeID = notification.userInfo?[TinyStorage.writeIDUserInfoKey] as? String
                // Traps unless this runs on the main actor, which is what 2.x apps rely on.
                MainActor.assumeIsolated { events.append("queue nil: \(keys) \(writeID ?? "-")") }
            }
            defer { NotificationCenter.default.removeObserver(plain) }
            withObservationTracking {
                _ = storage.autoUpdatingRetrieve(type: Int.self, forKey: "count")
            } onChange: {
                MainActor.assumeIsolated { events.append("onChange") }
            }

            storage.store(1, forKey: "count", writeID: "first")
            storage.store("x", forKey: "other")
            // Another instance (as another process would be) is announced on the main actor too.
            TinyStorage(insideDirectory: directory, name: "unit").store(2, forKey: "count", writeID: "elsewhere")

            let seen = await events.wait(forCount: 4)
            #expect(
                seen == [
                    "onChange", "queue nil: [\"count\"] first", "queue nil: [\"other\"] -",
                    "queue nil: [\"count\"] elsewhere",
                ])
        }
    }

    @Test @MainActor func observersOnTheMainOperationQueueRunToo() async throws {
        try await withCompatStore { storage, _ throws in
            let events = MainEvents()
            let onMain = NotificationCenter.default.addObserver(
                forName: TinyStorage.didChangeNotification, object: storage, queue: .main
            ) { notification in
                let keys = notification.userInfo?[TinyStorage.changedKeysUserInfoKey] as? [String] ?? []
                MainActor.assumeIsolated { events.append("\(keys)") }
            }
            defer { NotificationCenter.default.removeObserver(onMain) }
            for index in 0..<5 { storage.store(index, forKey: "k\(index)") }
            #expect(await events.wait(forCount: 5) == (0..<5).map { "[\"k\($0)\"]" })
        }
    }

    @Test func aStoreGivenAQueueAnnouncesOnThatQueueInCommitOrder() async throws {
        let queue = DispatchQueue(label: "compat.changes", attributes: .concurrent)
        let marker = DispatchSpecificKey<Int>()
        queue.setSpecific(key: marker, value: 7)
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("TinyStorageCompat-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = TinyStorage(insideDirectory: directory, name: "unit", notificationQueue: queue)
        let notifications = CompatNotifications(storage, marker: marker)

        for index in 0..<50 { storage.store(index, forKey: "k\(index % 3)", writeID: "w\(index)") }
        let received = notifications.wait(forCount: 50)
        #expect(received.map(\.writeID) == (0..<50).map { "w\($0)" })
        #expect(received.map(\.queueMark) == Array(repeating: 7, count: 50))
    }

    @Test func valueStreamsDoNotWaitForTheAnnouncingQueue() async throws {
        // NB: the announcing queue (the main queue by default) is held until the stream has
        // delivered, so a stream that depended on it would never yield (the test would hang);
        // the CLI's `watch` shows the same in a process whose main queue never runs.
        let announcing = DispatchQueue(label: "compat.held")
        announcing.suspend()
        defer { announcing.resume() }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("TinyStorageCompat-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = TinyStorage(insideDirectory: directory, name: "unit", notificationQueue: announcing)
        let notifications = CompatNotifications(storage)
        var values = storage.values(forKey: "k", as: Int.self).makeAsyncIterator()
        #expect(await values.next() == .some(nil))
        storage.store(5, forKey: "k")
        storage.store(6, forKey: "k")
        #expect(await values.next() == 5)
        #expect(await values.next() == 6)
        #expect(notifications.all.isEmpty)
    }
}

/// A value guarded by a lock, for observers that run on other threads.
final class Guarded<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<R>(_ body: (inout Value) -> R) -> R { lock.withLock { body(&value) } }
}
