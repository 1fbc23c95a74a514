import Foundation
import Testing

@testable import TinyStorage

/// Issue 3 item 3 (SPEC G6) in one process: `didChangeNotification` once per local commit (another
/// instance's consecutive commits with one writeID, together), in commit order, with `object` =
/// the store, the changed keys and the writeID; nothing for writes that
/// change no bytes; observers may read and write the store from inside the notification.
///
/// Local announcements are awaited with `engine.delivery.waitUntilDelivered()`; another
/// instance's are awaited by count, with a deadline that only guards against a hang.
@Suite struct ChangeNotificationTests {
    /// A single-key commit's change is read back from the log by the delivery queue (see
    /// `LoggedChanges`). When something other than the store overwrote the record before that,
    /// the commit is still announced, in its place, naming every key the store holds: a listener
    /// may hear of more than changed, never of less.
    @Test(.enabled(if: isLinux, "changes are read back from the log where commits append through a mapping"))
    func aCommitWhoseRecordWasOverwrittenBeforeDeliveryIsStillAnnounced() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow(1, forKey: "other")
            let log = AnnouncementLog(storage)
            storage.engine.delivery.pauseDrains()
            try storage.storeOrThrow(2, forKey: "a", writeID: "first")
            try storage.storeOrThrow(3, forKey: "b", writeID: "second")
            let end = storage.engine.state.withLock { $0.log.end }
            // NB: two bytes before the second record's end: inside its payload, so it no longer verifies.
            let file = try FileHandle(forWritingTo: storage.fileURL)
            try file.seek(toOffset: UInt64(end - 2))
            try file.write(contentsOf: Data([0xFF, 0xFF]))
            try file.close()
            storage.engine.delivery.resumeDrains()

            #expect(log.delivered == [Announcement(["a"], "first"), Announcement(["a", "b", "other"])])
        }
    }

    @Test func everyKindOfLocalCommitIsAnnouncedOnceWithTheStoreItsKeysAndWriteID() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let log = AnnouncementLog(storage)
            var expected: [Announcement] = []
            func commit(_ keys: [String], _ body: (String) throws -> Void) rethrows {
                let writeID = UUID().uuidString
                try body(writeID)
                expected.append(Announcement(keys, writeID))
            }
            try commit(["a"]) { try storage.storeOrThrow(1, forKey: "a", writeID: $0) }
            try commit(["a"]) { try storage.update("a", as: Int.self, writeID: $0) { $0 = ($0 ?? 0) + 1 } }
            try commit(["a"]) { try storage.incrementIntegerOrThrow(forKey: "a", by: 5, writeID: $0) }
            try commit(["b"]) { try storage.update("b", as: [String].self, writeID: $0) { $0 = ["x"] } }
            // Only the keys whose bytes change are announced: "a" is 7 already.
            try commit(["b", "c"]) {
                try storage.bulkStoreOrThrow(items: ["a": 7, "b": ["y"], "c": 3], writeID: $0)
            }
            try commit(["b"]) { try storage.update("b", as: [String].self, writeID: $0) { $0 = nil } }
            commit(["c"]) { storage.remove(key: "c", writeID: $0) }
            storage.store("no ID", forKey: "d")
            expected.append(Announcement(["d"]))
            commit(["a", "d"]) { storage.reset(writeID: $0) }

            #expect(log.delivered == expected)
            #expect(log.malformed.all.isEmpty)
        }
    }

    @Test func writingTheSameBytesAnnouncesNothingAndTheNextChangeIsAnnounced() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let other = openStore(directory)
            try storage.storeOrThrow(1, forKey: "a")
            try storage.storeOrThrow(["x": [1, 2]], forKey: "map")
            let log = AnnouncementLog(storage)
            let size = try committedLength(storage.fileURL)

            // The same bytes, by every write path, here and through another instance.
            try storage.storeOrThrow(1, forKey: "a", writeID: UUID().uuidString)
            try storage.storeOrThrow(["x": [1, 2]], forKey: "map", writeID: UUID().uuidString)
            try storage.update("a", as: Int.self, writeID: UUID().uuidString) { $0 = 1 }
            try storage.incrementIntegerOrThrow(forKey: "a", by: 0, writeID: UUID().uuidString)
            try storage.bulkStoreOrThrow(items: ["a": 1], writeID: UUID().uuidString)
            try storage.bulkStoreOrThrow(items: ["a": 2], skipKeyIfAlreadyPresent: true, writeID: UUID().uuidString)
            storage.remove(key: "absent", writeID: UUID().uuidString)
            storage.store(nil, forKey: "absent")
            storage.store(Double.nan, forKey: "refused")  // refused: it does not encode
            try other.storeOrThrow(1, forKey: "a", writeID: UUID().uuidString)
            try other.update("map", as: [String: [Int]].self, writeID: UUID().uuidString) { $0?["x"] = [1, 2] }
            #expect(try committedLength(storage.fileURL) == size, "a write that changes nothing appended a record")

            let changed = UUID().uuidString
            try storage.storeOrThrow(2, forKey: "b", writeID: changed)
            #expect(log.delivered == [Announcement(["b"], changed)])
            #expect(log.malformed.all.isEmpty)
        }
    }

    @Test func concurrentWritersAreEachAnnouncedOnceAndInEachWritersOrder() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let log = AnnouncementLog(storage)
            let writers = 4
            let commits = 100
            let writeIDs = (0..<writers).map { _ in (0..<commits).map { _ in UUID().uuidString } }
            DispatchQueue.concurrentPerform(iterations: writers) { writer in
                for (value, writeID) in writeIDs[writer].enumerated() {
                    storage.store(value, forKey: "w\(writer)", writeID: writeID)
                }
            }

            let delivered = log.delivered
            #expect(delivered.count == writers * commits)
            for writer in 0..<writers {
                let own = delivered.filter { $0.keys == ["w\(writer)"] }.map(\.writeID)
                #expect(own == writeIDs[writer], "writer \(writer)'s commits were announced out of order or not once")
            }
        }
    }

    @Test func anotherInstancesCommitsAreAnnouncedOnceEachInCommitOrder() throws {
        try withTemporaryDirectory { directory throws in
            let writer = openStore(directory)
            let observed = openStore(directory)
            let log = AnnouncementLog(observed)
            var expected: [Announcement] = []
            for value in 1...150 {
                let writeID = UUID().uuidString
                switch value % 3 {
                case 0: try writer.storeOrThrow(value, forKey: "k", writeID: writeID)
                case 1: try writer.bulkStoreOrThrow(items: ["k": value, "m": value], writeID: writeID)
                default: try writer.update("m", as: Int.self, writeID: writeID) { $0 = value }
                }
                expected.append(Announcement(value % 3 == 0 ? ["k"] : value % 3 == 1 ? ["k", "m"] : ["m"], writeID))
            }
            // Nobody touches `observed`: its file watch alone must bring every commit.
            let received = log.received.wait(forCount: expected.count)
            #expect(received == expected)
            #expect(observed.integer(forKey: "k") == 150)
            #expect(log.delivered == expected)
        }
    }

    @Test func observersMayReadAndWriteTheStoreFromInsideTheNotification() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let other = openStore(directory)
            // Answers each "ping" by reading it and storing it as "pong", through the store that
            // posted the notification, on the delivery queue.
            let answered = Arrivals<Int>()
            let observer = NotificationCenter.default.addObserver(
                forName: TinyStorage.didChangeNotification, object: storage, queue: nil
            ) { notification in
                guard let keys = notification.userInfo?[TinyStorage.changedKeysUserInfoKey] as? [String],
                    keys.contains("ping"), let ping = storage.retrieve(type: Int.self, forKey: "ping")
                else { return }
                _ = storage.allKeys
                storage.store(ping, forKey: "pong")
                storage.incrementInteger(forKey: "answers")
                answered.append(ping)
            }
            defer { NotificationCenter.default.removeObserver(observer) }

            let finished = finishes {
                // Local commits, then another instance's (announced through the file watch).
                for ping in 1...20 { storage.store(ping, forKey: "ping") }
                _ = answered.wait(forCount: 20)
                for ping in 21...40 { other.store(ping, forKey: "ping") }
                _ = answered.wait { $0.last == 40 }
            }
            #expect(finished, "a store call from inside a notification deadlocked")
            // One answer per local ping commit; the other instance's may be announced together
            // (one answer for several). Each read inside saw its commits or later ones.
            let answers = answered.all
            #expect(answers.prefix(20).count == 20 && answers.count <= 40, "\(answers)")
            #expect(answers.last == 40 && answers == answers.sorted(), "\(answers)")
            #expect(zip(answers, 1...).allSatisfy { $0 >= $1 }, "a read inside a notification saw an older value")
            #expect(storage.retrieve(type: Int.self, forKey: "pong") == 40)
            #expect(other.integer(forKey: "answers") == answers.count)
        }
    }

    /// Another process's commits are announced together (SPEC G6, issue 32): consecutive ones
    /// carrying the same writeID, or none, arrive as one notification naming every key they
    /// changed, in the order they first changed; commits with different writeIDs are announced one
    /// by one, each with its own. Value streams still receive every change. (Drains are held
    /// back while the other instance commits, so all its commits are caught up before the
    /// delivery looks.)
    @Test func anotherInstancesCommitsAreAnnouncedTogetherPerWriteID() async throws {
        try await withScratchDirectory { directory in
            let storage = openStore(directory)
            let other = openStore(directory)
            try storage.storeOrThrow(0, forKey: "n")
            let log = AnnouncementLog(storage)
            let stream = storage.values(forKey: "n", as: Int.self)
            storage.engine.delivery.pauseDrains()
            for value in 1...100 { try other.storeOrThrow(value, forKey: "n") }
            try other.storeOrThrow("x", forKey: "s")
            try other.storeOrThrow(101, forKey: "n")
            try other.storeOrThrow(1, forKey: "t", writeID: "first")
            try other.storeOrThrow(2, forKey: "t", writeID: "first")
            try other.storeOrThrow(3, forKey: "u", writeID: "second")
            try other.storeOrThrow(4, forKey: "t")
            try storage.storeOrThrow(5, forKey: "mine")
            try other.storeOrThrow(6, forKey: "t")
            #expect(storage.integer(forKey: "n") == 101)
            storage.engine.delivery.resumeDrains()

            #expect(
                log.delivered == [
                    Announcement(["n", "s"]), Announcement(["t"], "first"), Announcement(["u"], "second"),
                    Announcement(["t"]), Announcement(["mine"]), Announcement(["t"]),
                ])
            #expect(await collect(stream, count: 102) == Array(0...101))
        }
    }
}
