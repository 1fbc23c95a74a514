import Foundation
import Testing

@testable import TinyStorage

extension TinyStorage.Key where Value == String? {
    fileprivate static var session: Self { .init("session", expiresAfter: .seconds(60)) }
}

extension TinyStorage.Key where Value == Int {
    fileprivate static var attempts: Self { .init("attempts", default: 0, expiresAfter: .seconds(60)) }
}

/// Values stored with `expiresAfter:` (issue 33, item 3): readable until their deadline, absent
/// at and after it through every read path, by the wall clock (a `ManualClock` here: no sleeps).
@Suite struct ExpiryReadTests {
    struct Profile: Codable, Equatable, Sendable {
        var name: String
    }

    @Test func aValueReadsUntilItsDeadlineAndIsAbsentFromItOnEveryReadPath() throws {
        try withTemporaryDirectory { directory throws in
            let clock = ManualClock()
            let storage = openStore(directory, options: clock.options())
            try storage.storeOrThrow(7, forKey: "count", expiresAfter: .seconds(10))
            try storage.storeOrThrow(Profile(name: "Ada"), forKey: "profile", expiresAfter: .seconds(10))
            try storage.storeOrThrow("kept", forKey: "forever")

            // Twice each: the second read is answered from the decoded-value cache.
            for _ in 0..<2 {
                #expect(storage.retrieve(type: Int.self, forKey: "count") == 7)
                #expect(storage.retrieve(type: Profile.self, forKey: "profile") == Profile(name: "Ada"))
            }
            clock.advance(by: 9_999)
            #expect(storage.retrieve(type: Int.self, forKey: "count") == 7, "a millisecond before the deadline")
            #expect(storage.contains("count"))

            clock.advance(by: 1)
            #expect(storage.retrieve(type: Int.self, forKey: "count") == nil, "at the deadline")
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "count") == nil)
            #expect(storage.retrieve(type: Profile.self, forKey: "profile") == nil)
            #expect(storage.integer(forKey: "count") == 0)
            #expect(!storage.contains("count"))
            #expect(!storage.contains("profile"))
            #expect(storage.allKeys.map(\.rawValue) == ["forever"])
            #expect(try storage.rawEntries().keys.sorted() == ["forever"], "the export leaves it out")
            #expect(try storage.expiration(forKey: "count") == nil)
            #expect(try storage.statistics.keyCount == 1)
            #expect(storage.retrieve(type: String.self, forKey: "forever") == "kept")
        }
    }

    @Test func aValueStoredWithoutExpiryNeverExpires() throws {
        try withTemporaryDirectory { directory throws in
            let clock = ManualClock()
            let storage = openStore(directory, options: clock.options())
            try storage.storeOrThrow(1, forKey: "plain")
            storage[.attempts] = 3
            try storage.storeOrThrow(2, forKey: "plain")  // written over, still without a deadline
            clock.advance(by: Int64(Deadline.maximumMilliseconds - clock.now))  // the year 10889
            #expect(storage.retrieve(type: Int.self, forKey: "plain") == 2)
            #expect(try storage.expiration(forKey: "plain") == nil)
            #expect(storage[.attempts] == 0, "the expiring one has long gone")
            let reopened = openStore(directory, options: clock.options())
            #expect(try reopened.retrieveOrThrow(type: Int.self, forKey: "plain") == 2)
        }
    }

    @Test func anotherInstanceAndALaterOpenAgreeOnTheDeadline() throws {
        try withTemporaryDirectory { directory throws in
            let clock = ManualClock()
            let writer = openStore(directory, options: clock.options())
            let reader = openStore(directory, options: clock.options())
            #expect(reader.retrieve(type: String.self, forKey: "token") == nil)
            try writer.storeOrThrow("abc", forKey: "token", expiresAfter: .milliseconds(1_500))
            #expect(reader.retrieve(type: String.self, forKey: "token") == "abc")
            let deadline = try #require(try reader.expiration(forKey: "token"))
            #expect(deadline == Date(timeIntervalSince1970: Double(clock.now + 1_500) / 1000))
            // A store opened after the write, before its index is built (see PendingIndex), too.
            let later = openStore(directory, options: clock.options())
            #expect(try later.expiration(forKey: "token") == deadline)
            clock.advance(by: 1_500)
            #expect(reader.retrieve(type: String.self, forKey: "token") == nil)
            #expect(openStore(directory, options: clock.options()).retrieve(type: String.self, forKey: "token") == nil)
            #expect(later.retrieve(type: String.self, forKey: "token") == nil)
        }
    }

    @Test func storingTheSameValueWithANewDeadlineWritesTheDeadline() throws {
        try withTemporaryDirectory { directory throws in
            let clock = ManualClock()
            let storage = openStore(directory, options: clock.options())
            try storage.storeOrThrow("v", forKey: "k", expiresAfter: .seconds(10))
            let first = try #require(try storage.expiration(forKey: "k"))
            let size = try committedLength(storage.fileURL)
            clock.advance(by: 5_000)
            try storage.storeOrThrow("v", forKey: "k", expiresAfter: .seconds(10))
            #expect(try committedLength(storage.fileURL) > size, "a new deadline is a commit, not an unchanged write")
            #expect(try storage.expiration(forKey: "k") == first.addingTimeInterval(5))
            clock.advance(by: 9_000)
            #expect(storage.retrieve(type: String.self, forKey: "k") == "v", "past the first deadline, not the new one")
            #expect(
                try openStore(directory, options: clock.options()).expiration(forKey: "k")
                    == first.addingTimeInterval(5))

            // The same value without a lifetime clears the deadline.
            try storage.storeOrThrow("v", forKey: "k")
            #expect(try storage.expiration(forKey: "k") == nil)
            clock.advance(by: 60_000)
            #expect(storage.retrieve(type: String.self, forKey: "k") == "v")
            #expect(
                try openStore(directory, options: clock.options()).retrieveOrThrow(type: String.self, forKey: "k")
                    == "v")
        }
    }

    @Test func aTypedKeysLifetimeGivesEveryWriteAFreshDeadline() throws {
        try withTemporaryDirectory { directory throws in
            let clock = ManualClock()
            let storage = openStore(directory, options: clock.options())
            storage[.session] = "one"
            #expect(try storage.expiration(forKey: TinyStorage.Key<String?>.session) != nil)
            clock.advance(by: 40_000)
            try storage.update(.attempts) { $0 += 1 }
            clock.advance(by: 40_000)
            #expect(storage[.session] == nil, "80 s after a write with a 60 s lifetime")
            #expect(storage[.attempts] == 1, "40 s after its write")
            try storage.update(.attempts) { $0 += 1 }  // a fresh deadline: 60 s from now
            clock.advance(by: 59_999)
            #expect(storage[.attempts] == 2)
            clock.advance(by: 1)
            #expect(storage[.attempts] == 0, "the default once expired")
            #expect(try storage.value(for: .attempts) == 0)
            let item = TinyStorageItem(.session, storage: storage)
            item.wrappedValue = "two"
            #expect(
                try storage.expiration(forKey: "session")
                    == Date(timeIntervalSince1970: Double(clock.now + 60_000) / 1000))
        }
    }

    @Test func updatesAndIncrementsKeepTheDeadlineAndSeeAnExpiredValueAsAbsent() throws {
        try withTemporaryDirectory { directory throws in
            let clock = ManualClock()
            let storage = openStore(directory, options: clock.options())
            try storage.storeOrThrow(1, forKey: "hits", expiresAfter: .seconds(30))
            let deadline = try storage.expiration(forKey: "hits")
            clock.advance(by: 10_000)
            #expect(try storage.incrementIntegerOrThrow(forKey: "hits") == 2)
            try storage.update("hits", as: Int.self) { $0 = ($0 ?? 0) * 10 }
            #expect(try storage.expiration(forKey: "hits") == deadline, "still the first deadline")
            #expect(storage.retrieve(type: Int.self, forKey: "hits") == 20)
            clock.advance(by: 20_000)
            var seen: Int?? = .none
            try storage.update("hits", as: Int.self) { value in
                seen = .some(value)
                value = 1
            }
            #expect(seen == .some(nil), "update starts from nil once the value expired")
            #expect(try storage.expiration(forKey: "hits") == nil, "and writes a value that never expires")
            #expect(storage.incrementInteger(forKey: "hits") == 2)
        }
    }

    @Test func registeringDefaultsWritesAKeyWhoseValueExpired() throws {
        try withTemporaryDirectory { directory throws in
            let clock = ManualClock()
            let storage = openStore(directory, options: clock.options())
            try storage.bulkStoreOrThrow(items: ["a": 1, "b": 2], expiresAfter: .seconds(5))
            #expect(try storage.expiration(forKey: "a") == storage.expiration(forKey: "b"))
            storage.bulkStore(items: ["a": 10], skipKeyIfAlreadyPresent: true)
            #expect(storage.retrieve(type: Int.self, forKey: "a") == 1, "present: kept")
            clock.advance(by: 5_000)
            storage.bulkStore(items: ["a": 10], skipKeyIfAlreadyPresent: true)
            #expect(storage.retrieve(type: Int.self, forKey: "a") == 10, "expired: written")
            #expect(try storage.expiration(forKey: "a") == nil)
        }
    }

    @Test func removingAValueThatExpiredWritesNothing() throws {
        try withTemporaryDirectory { directory throws in
            let clock = ManualClock()
            let storage = openStore(directory, options: clock.options())
            try storage.storeOrThrow(1, forKey: "k", expiresAfter: .seconds(1))
            clock.advance(by: 1_000)
            let size = try committedLength(storage.fileURL)
            storage.remove(key: "k")
            #expect(try !storage.removeOrThrow(key: "k"), "the tool's delete says it was not there")
            #expect(try committedLength(storage.fileURL) == size)
        }
    }

    @Test(arguments: [Duration.zero, .seconds(-1), .nanoseconds(-1)])
    func aLifetimeThatIsNotPositiveIsRefusedAndWritesNothing(lifetime: Duration) throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow(1, forKey: "k")
            let size = try committedLength(storage.fileURL)
            let error = expectError(.invalidExpiration) {
                try storage.storeOrThrow(2, forKey: "k", expiresAfter: lifetime)
            }
            #expect(error?.message.contains("Nothing was written") == true)
            expectError(.invalidExpiration) { try storage.bulkStoreOrThrow(items: ["k": 3], expiresAfter: lifetime) }
            storage.store(4, forKey: "k", expiresAfter: lifetime)
            #expect(storage.retrieve(type: Int.self, forKey: "k") == 1)
            #expect(try committedLength(storage.fileURL) == size)
        }
    }

    @Test func aLifetimeOfAMillisecondOrLessEndsAMillisecondLater() throws {
        let now: UInt64 = 1_000
        #expect(Deadline(after: .nanoseconds(1), from: now).milliseconds == 1_001)
        #expect(Deadline(after: .milliseconds(1), from: now).milliseconds == 1_001)
        #expect(Deadline(after: .microseconds(1_500), from: now).milliseconds == 1_002)
        #expect(Deadline(after: .seconds(Int64.max), from: now).milliseconds == Deadline.maximumMilliseconds)
    }
}
