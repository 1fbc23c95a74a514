import Foundation
import Testing

@testable import TinyStorage

/// Issue 34, item 4: after a repair that lost durable data, a throwing read reports the loss for
/// the keys the damaged bytes held, once each, and answers every other key as usual.
///
/// The store is `CorruptionTests`' history, `a = 1, b = "two", a = 3, c = [1, 2], b = nil,
/// d = true`, flushed, with one record damaged.
@Suite struct DataLossReportTests {
    let history = CorruptionTests()

    /// The history with one byte of record `index` (1-based) flipped at `offsetFromEnd` bytes
    /// before the record's end, opened as a new store.
    func damaged(record index: Int, offsetFromEnd: Int, in parent: URL) throws -> TinyStorage {
        let made = try history.makeHistory(in: parent, flushed: true)
        var bytes = made.bytes
        bytes[made.boundaries[index] - offsetFromEnd] ^= 0x01
        return try history.openDataFile(bytes, in: parent, name: "damaged")
    }

    /// The overwrite `a = 3` is damaged: `a` reads its older value, which its first throwing read
    /// says; `c` and `d`, which the damage did not hold, read as usual and throw nothing.
    @Test func onlyAKeyTheDamageHeldReportsTheLossAndOnlyOnce() throws {
        try withTemporaryDirectory { parent throws in
            let storage = try damaged(record: 3, offsetFromEnd: 1, in: parent)
            #expect(storage.recoveryReports.map(\.possiblyAffectedKeys) == [["a"]])

            #expect(try storage.retrieveOrThrow(type: [Int].self, forKey: "c") == [1, 2])
            #expect(try storage.value(for: TinyStorage.Key<Bool>("d", default: false)) == true)
            let error = expectError(.corrupted) { try storage.retrieveOrThrow(type: Int.self, forKey: "a") }
            #expect(error?.key == "a")
            #expect(error?.message.contains("known to be on stable storage") == true, "\(String(describing: error))")
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "a") == 1, "reported once; what verified")
            #expect(throws: Never.self) { try storage.rawJSON() }
        }
    }

    /// A non-throwing read of the damaged key first does not let its cached value hide the
    /// report from the throwing read that follows, of whatever kind.
    @Test(arguments: CorruptionTests.ThrowingRead.allCases)
    func aCachedReadOfTheDamagedKeyDoesNotHideTheReport(read: CorruptionTests.ThrowingRead) throws {
        try withTemporaryDirectory { parent throws in
            let storage = try damaged(record: 3, offsetFromEnd: 1, in: parent)
            #expect(storage.retrieve(type: Int.self, forKey: "a") == 1)
            #expect(storage[TinyStorage.Key<Int>("a", default: 0)] == 1)
            #expect(try storage.retrieveOrThrow(type: Bool.self, forKey: "d") == true)

            let error = expectError(.corrupted) {
                switch read {
                case .retrieveOrThrow: _ = try storage.retrieveOrThrow(type: Int.self, forKey: "a")
                case .typedKey: _ = try storage.value(for: TinyStorage.Key<Int>("a", default: 0))
                case .raw: _ = try storage.rawValue(forKey: "a")
                }
            }
            #expect(error?.key == "a")
            #expect(try storage.value(for: TinyStorage.Key<Int>("a", default: 0)) == 1)
        }
    }

    /// The damaged length of `c`'s record names no key: any key may have been hit, so the first
    /// throwing read, of whichever key, reports the loss, once for all.
    @Test func aLossThatNamesNoKeyIsReportedByTheFirstThrowingReadOfAnyKey() throws {
        try withTemporaryDirectory { parent throws in
            let made = try history.makeHistory(in: parent, flushed: true)
            var bytes = made.bytes
            bytes.replaceSubrange(made.boundaries[3]..<made.boundaries[3] + 4, with: [0xF0, 0xFF, 0xFF, 0xFF])
            let storage = try history.openDataFile(bytes, in: parent, name: "damaged")
            #expect(storage.recoveryReports.map(\.possiblyAffectedKeys) == [[]])

            let error = expectError(.corrupted) { try storage.retrieveOrThrow(type: Bool.self, forKey: "d") }
            #expect(error?.key == nil)
            #expect(try storage.retrieveOrThrow(type: Bool.self, forKey: "d") == true)
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "a") == 3)
        }
    }

    /// A read of the whole store reports a loss whichever keys it hit, and then no key does.
    @Test func aReadOfEveryKeyReportsTheLossForAllOfThem() throws {
        try withTemporaryDirectory { parent throws in
            let storage = try damaged(record: 3, offsetFromEnd: 1, in: parent)
            expectDataLossReportedOnce(by: storage)
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "a") == 1)
        }
    }
}
