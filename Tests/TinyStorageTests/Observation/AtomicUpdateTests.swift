import Foundation
import Testing

@testable import TinyStorage

/// Issue 3 item 1: `update(_:as:writeID:_:)` is one atomic read-modify-write. A body that throws
/// writes and announces nothing; an unchanged value writes nothing; concurrent updates from
/// threads and instances lose nothing.
@Suite struct AtomicUpdateTests {
    struct Visits: Codable, Equatable, Sendable {
        var count = 0
        var days: [String] = []
    }

    struct Refused: Error, Equatable {}

    @Test func aBodyThatThrowsWritesNothingAndAnnouncesNothing() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let other = openStore(directory)
            try storage.storeOrThrow(Visits(count: 1, days: ["mon"]), forKey: "visits")
            let log = AnnouncementLog(storage)
            let size = try committedLength(storage.fileURL)

            #expect(throws: Refused.self) {
                try storage.update("visits", as: Visits.self, writeID: UUID().uuidString) { visits in
                    visits?.count = 99
                    visits?.days.append("tue")
                    throw Refused()
                }
            }
            #expect(throws: Refused.self) {
                try storage.update("absent", as: Int.self) { value in
                    value = 1
                    throw Refused()
                }
            }
            #expect(try committedLength(storage.fileURL) == size)
            #expect(storage.retrieve(type: Visits.self, forKey: "visits") == Visits(count: 1, days: ["mon"]))
            #expect(other.retrieve(type: Visits.self, forKey: "visits") == Visits(count: 1, days: ["mon"]))
            #expect(!storage.contains("absent"))

            // The store is not left locked: the next update goes through, and is the only announcement.
            let writeID = UUID().uuidString
            try other.update("visits", as: Visits.self, writeID: writeID) { $0?.count += 1 }
            #expect(log.received.wait(forCount: 1) == [Announcement(["visits"], writeID)])
            #expect(log.delivered == [Announcement(["visits"], writeID)])
        }
    }

    @Test func anUnchangedValueWritesNothingAndNilRemovesTheKey() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow(Visits(count: 2), forKey: "visits")
            let log = AnnouncementLog(storage)
            let size = try committedLength(storage.fileURL)

            let seen = try storage.update("visits", as: Visits.self) { visits in
                visits = Visits(count: 2)
                return visits?.count
            }
            #expect(seen == 2)
            #expect(try committedLength(storage.fileURL) == size)

            try storage.update("visits", as: Visits.self) { $0 = nil }
            #expect(!storage.contains("visits"))
            try storage.update("absent", as: Visits.self) { $0 = nil }
            #expect(log.delivered == [Announcement(["visits"])])
        }
    }

    @Test func aStoredValueOfAnotherTypeIsKeptAndTheBodyNeverRuns() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow("not visits", forKey: "visits")
            let ran = Locked(false)
            let error = expectError(.decodingFailed) {
                try storage.update("visits", as: Visits.self) { _ in ran.withLock { $0 = true } }
            }
            #expect(error?.key == "visits")
            #expect(!ran.withLock { $0 })
            #expect(storage.retrieve(type: String.self, forKey: "visits") == "not visits")
        }
    }

    @Test func concurrentUpdatesFromThreadsAndInstancesLoseNothing() throws {
        try withTemporaryDirectory { directory throws in
            let instances = [openStore(directory), openStore(directory)]
            let threads = 4
            let updates = 250
            DispatchQueue.concurrentPerform(iterations: threads) { thread in
                let storage = instances[thread % instances.count]
                for _ in 0..<updates {
                    do {
                        try storage.update("visits", as: Visits.self) { visits in
                            var next = visits ?? Visits()
                            next.count += 1
                            next.days.append("t\(thread)")
                            visits = next
                        }
                    } catch {
                        Issue.record("update failed: \(error)")
                    }
                }
            }
            for storage in instances + [openStore(directory)] {
                let visits = try #require(storage.retrieve(type: Visits.self, forKey: "visits"))
                #expect(visits.count == threads * updates)
                #expect(visits.days.count == threads * updates)
                for thread in 0..<threads { #expect(visits.days.filter { $0 == "t\(thread)" }.count == updates) }
            }
        }
    }
}
