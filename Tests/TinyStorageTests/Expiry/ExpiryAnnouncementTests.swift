import Foundation
import Testing

@testable import TinyStorage

/// Observers hear that a value expired (issue 33, item 3): each instance asks its clock to wake
/// it at the earliest deadline among its entries, then announces the keys whose deadline passed
/// as changed, once, as an external change without a writeID; value streams yield `nil`. A
/// `ManualClock` decides when wakes run: no sleeps, no timing.
@Suite struct ExpiryAnnouncementTests {
    @Test func eachExpiryIsAnnouncedOnceWhenItsWakeRuns() throws {
        try withTemporaryDirectory { directory throws in
            let clock = ManualClock()
            let storage = openStore(directory, options: clock.options())
            let start = clock.now
            #expect(clock.pendingWakes.isEmpty)
            try storage.storeOrThrow(1, forKey: "a", expiresAfter: .seconds(10))
            try storage.storeOrThrow(2, forKey: "b", expiresAfter: .seconds(20))
            try storage.storeOrThrow(3, forKey: "plain")
            #expect(clock.pendingWakes == [Deadline(milliseconds: start + 10_000)], "one wake, at the earliest")
            let log = AnnouncementLog(storage)

            clock.advance(by: 9_999)
            #expect(clock.runDueWakes() == 0)
            clock.advance(by: 1)
            #expect(clock.runDueWakes() == 1)
            #expect(log.delivered == [Announcement(["a"])])
            #expect(clock.pendingWakes == [Deadline(milliseconds: start + 20_000)], "then one at the next")

            clock.advance(by: 60_000)
            #expect(clock.runDueWakes() == 1)
            #expect(log.delivered == [Announcement(["a"]), Announcement(["b"])])
            #expect(clock.pendingWakes.isEmpty, "nothing left to expire")
            #expect(storage.retrieve(type: Int.self, forKey: "plain") == 3)
        }
    }

    /// The time limit only turns a hang (an expiry never announced) into a failure.
    @Test(.timeLimit(.minutes(1)))
    func aValueStreamYieldsNilWhenTheValueExpires() async throws {
        try await withScratchDirectory { directory in
            let clock = ManualClock()
            let storage = openStore(directory, options: clock.options())
            var values = storage.values(forKey: "code", as: Int.self).makeAsyncIterator()
            #expect(await values.next() == .some(nil))
            try storage.storeOrThrow(42, forKey: "code", expiresAfter: .seconds(5))
            #expect(await values.next() == 42)
            clock.advance(by: 5_000)
            #expect(clock.runDueWakes() == 1)
            #expect(await values.next() == .some(nil))
            try storage.storeOrThrow(43, forKey: "code")
            #expect(await values.next() == 43, "and nothing came between")
        }
    }

    /// A value handed to a stream that expires before the task takes it is taken as `nil`: the
    /// stream never yields a value a read would not return.
    @Test func aValueThatExpiredBeforeTheStreamsTaskTookItIsYieldedAsNil() async throws {
        try await withScratchDirectory { directory in
            let clock = ManualClock()
            let storage = openStore(directory, options: clock.options())
            // NB: the file is version 3 first, so the commit below takes the single-key path
            // (on Linux, whose change the delivery reads back from the log).
            try storage.storeOrThrow(0, forKey: "other", expiresAfter: .seconds(3600))
            let stream = storage.values(forKey: "code", as: Int.self)
            try storage.storeOrThrow(42, forKey: "code", expiresAfter: .seconds(5))
            try storage.storeOrThrow(43, forKey: "other")
            try storage.storeOrThrow(44, forKey: "code")
            clock.advance(by: 5_000)
            // The deadline of `collect` only guards against a hang: three values are expected.
            #expect(await collect(stream, count: 3) == [nil, nil, 44])
        }
    }

    @Test func aValueWrittenOverOrRemovedBeforeItsDeadlineIsNotAnnouncedAsExpired() throws {
        try withTemporaryDirectory { directory throws in
            let clock = ManualClock()
            let storage = openStore(directory, options: clock.options())
            try storage.storeOrThrow(1, forKey: "a", expiresAfter: .seconds(10))
            try storage.storeOrThrow(1, forKey: "b", expiresAfter: .seconds(10))
            try storage.storeOrThrow(2, forKey: "a")
            storage.remove(key: "b")
            let log = AnnouncementLog(storage)
            clock.advance(by: 10_000)
            #expect(clock.runDueWakes() == 1, "the wake runs, and finds nothing to announce")
            #expect(log.delivered.isEmpty)
            #expect(clock.pendingWakes.isEmpty)
        }
    }

    @Test func anotherInstanceAnnouncesTheExpiryOfAValueItCaughtUpWith() throws {
        try withTemporaryDirectory { directory throws in
            let clock = ManualClock()
            let writer = openStore(directory, options: clock.options())
            let reader = openStore(directory, options: clock.options())
            #expect(reader.retrieve(type: Int.self, forKey: "a") == nil)
            let log = AnnouncementLog(reader)
            try writer.storeOrThrow(1, forKey: "a", writeID: "w", expiresAfter: .seconds(10))
            #expect(reader.retrieve(type: Int.self, forKey: "a") == 1)
            #expect(log.delivered == [Announcement(["a"], "w")])
            clock.advance(by: 10_000)
            #expect(clock.runDueWakes() == 2, "one wake per instance")
            #expect(log.delivered == [Announcement(["a"], "w"), Announcement(["a"])])
        }
    }

    @Test func aCompactionThatDropsExpiredValuesAnnouncesEachExpiryOnlyOnce() throws {
        try withTemporaryDirectory { directory throws in
            let clock = ManualClock()
            let writer = openStore(directory, options: clock.options())
            try writer.storeOrThrow(1, forKey: "announced", expiresAfter: .seconds(10))
            try writer.storeOrThrow(1, forKey: "pending", expiresAfter: .seconds(20))
            let reader = openStore(directory, options: clock.options())
            #expect(try reader.rawEntries().count == 2)
            let log = AnnouncementLog(reader)
            clock.advance(by: 10_000)
            clock.runDueWakes()
            #expect(log.delivered == [Announcement(["announced"])])

            // "pending" expires; the writer compacts before the reader's wake runs.
            clock.advance(by: 10_000)
            try writer.compactNow()
            #expect(try reader.rawEntries().isEmpty)
            #expect(log.delivered == [Announcement(["announced"]), Announcement(["pending"])])
            clock.runDueWakes()
            #expect(log.delivered == [Announcement(["announced"]), Announcement(["pending"])], "not again")
        }
    }
}
