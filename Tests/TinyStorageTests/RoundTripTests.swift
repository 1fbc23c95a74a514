import CTinyStorageShims
import Foundation
import Testing

@testable import TinyStorage

/// Values come back exactly as stored, from the same instance and from a new one on the same files.
@Suite struct RoundTripTests {
    struct Address: Codable, Equatable, Sendable {
        var street: String
        var zip: String?
    }

    struct Profile: Codable, Equatable, Sendable {
        var name: String
        var age: Int
        var tags: [String]
        var address: Address?
        var scores: [String: Double]
        var nested: [[Int]]
    }

    enum AppKey: String, TinyStorageKey {
        case streak, userName = "user.name"
    }

    /// Stores `value`, reads it back from the same instance and from a new instance.
    func roundTrip<T: Codable & Sendable>(
        _ value: T, as type: T.Type, in directory: URL, equal: (T, T) -> Bool
    ) throws {
        let storage = openStore(directory)
        try storage.storeOrThrow(value, forKey: "value")
        let again = try #require(try storage.retrieveOrThrow(type: T.self, forKey: "value"))
        #expect(equal(again, value), "same instance: \(again) != \(value)")
        // A second read is answered from the decoded-value cache: it must be the same value.
        let cached = try #require(try storage.retrieveOrThrow(type: T.self, forKey: "value"))
        #expect(equal(cached, value), "cached read: \(cached) != \(value)")
        let reopened = openStore(directory)
        let fromDisk = try #require(try reopened.retrieveOrThrow(type: T.self, forKey: "value"))
        #expect(equal(fromDisk, value), "new instance: \(fromDisk) != \(value)")
    }

    @Test(arguments: [0, 1, -1, 42, Int.max, Int.min, 1_000_000_007])
    func intRoundTrips(value: Int) throws {
        try withTemporaryDirectory { try roundTrip(value, as: Int.self, in: $0, equal: ==) }
    }

    /// The hand-written `Int` encoding spells every value as `JSONEncoder` does (its digits, a
    /// minus sign for negatives), so stores written by either read back equal.
    @Test(arguments: [0, 1, 9, 10, -1, -9, -10, 99, 100, 1_000_000_007, Int.max, Int.min, Int.min + 1])
    func intEncodesAsJSONEncoderDoes(value: Int) throws {
        #expect(ValueCoding.encodeInt(value) == ValueBytes(try JSONEncoder().encode(value)))
    }

    /// The commit path reads the value inside an `Optional<any Encodable>` where it lies: every
    /// kind of payload (kept inline in the existential or boxed, a class, an optional) must encode
    /// as a copy of it does, and every `nil`, however deeply wrapped, must mean a removal.
    @Test func anOptionalExistentialEncodesAsItsPayloadDoes() throws {
        final class Counter: Encodable {
            var counts = [3, 1, 2]
        }
        let profile = Profile(
            name: "Ada", age: 36, tags: ["a", "b"], address: Address(street: "Main", zip: nil),
            scores: ["x": 1.5], nested: [[1], [2, 3]])
        let values: [any Encodable] = [
            7, Int.min, "text", "needs \"escaping\"", true, 2.5, Data([0, 1, 2]), profile, Counter(),
            Int?.some(5), Int??.some(.some(6)), [1, 2], ["k": "v"],
        ]
        for value in values {
            let stored = try #require(try TinyStorage.encodedUnlessNil(value, forKey: "k"))
            #expect(stored == (try ValueCoding.encode(value, forKey: "k")), "\(value)")
        }
        let removals: [(any Encodable)?] = [nil, Int?.none, Int??.some(.none), String???.some(.some(.none))]
        for value in removals {
            #expect(try TinyStorage.encodedUnlessNil(value, forKey: "k") == nil)
        }
    }

    /// The scans for bytes a JSON string escapes (SSE2 blocks where the CPU has them, words
    /// elsewhere) agree with a byte-by-byte one for every byte value, at every position of every
    /// length up to 72 (in pairs of blocks, single blocks, words and tails), among plain ASCII and
    /// among UTF-8 continuation bytes.
    @Test func theEscapeScanFindsEveryByteJSONEscapes() {
        let scans: [(name: String, scan: (UnsafeRawBufferPointer) -> Bool)] = [
            ("the store's", ValueCoding.needsEscaping),
            ("the portable", { ts_json_needs_escape_portable($0.baseAddress, $0.count) }),
        ]
        for (name, scan) in scans {
            for filler: UInt8 in [UInt8(ascii: "a"), 0x80, 0xBF, 0xFF] {
                for length in 0...72 {
                    let plain = [UInt8](repeating: filler, count: length)
                    #expect(!plain.withUnsafeBytes(scan))
                    for position in 0..<length {
                        for byte in UInt8.min...UInt8.max {
                            var bytes = plain
                            bytes[position] = byte
                            let expected = byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
                            if bytes.withUnsafeBytes(scan) != expected {
                                Issue.record("\(name) scan: byte \(byte) at \(position) of \(length) among \(filler)")
                                return
                            }
                        }
                    }
                }
            }
        }
    }

    @Test(arguments: [true, false])
    func boolRoundTrips(value: Bool) throws {
        try withTemporaryDirectory { try roundTrip(value, as: Bool.self, in: $0, equal: ==) }
    }

    @Test(arguments: [
        "", "plain", "with \"quotes\"", "back\\slash\\", "new\nline\r\ttab", "slash/es and </script>",
        "unicode: héllo wörld ✓ 日本語 👩‍👩‍👧 🇨🇭", "e\u{301} (decomposed) vs \u{e9}", "\u{0}\u{1}\u{1f}\u{7f}",
        "\u{2028}\u{2029}", "{\"looks\": [\"like\", json]}", "trailing backslash \\",
        String(repeating: "long ", count: 2000),
    ])
    func stringRoundTripsByteForByte(value: String) throws {
        try withTemporaryDirectory { directory throws in
            try roundTrip(value, as: String.self, in: directory) { Array($0.utf8) == Array($1.utf8) }
        }
    }

    @Test(arguments: [
        0.0, -0.0, 1.0, -1.5, 0.1, 1.0 / 3.0, -273.15, 1e-300, -1e-300, .leastNonzeroMagnitude, -.leastNonzeroMagnitude,
        .leastNormalMagnitude,
        1e300, -1e300, Double.greatestFiniteMagnitude, -Double.greatestFiniteMagnitude, 123_456_789.125,
        9_007_199_254_740_992.0,
    ])
    func doubleRoundTripsBitForBit(value: Double) throws {
        try withTemporaryDirectory { directory throws in
            try roundTrip(value, as: Double.self, in: directory) { $0.bitPattern == $1.bitPattern }
        }
    }

    @Test func optionalsStoreTheWrappedValueAndNilRemoves() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let some: Int? = 3
            storage.store(some, forKey: "n")
            #expect(storage.retrieve(type: Int.self, forKey: "n") == 3)
            let none: Int? = nil
            storage.store(none, forKey: "n")
            #expect(storage.retrieve(type: Int.self, forKey: "n") == nil)
            #expect(!storage.contains("n"))
            #expect(openStore(directory).retrieve(type: Int.self, forKey: "n") == nil)

            // A struct with optional fields keeps `nil` fields as `nil`.
            try roundTrip(Address(street: "Main", zip: nil), as: Address.self, in: directory, equal: ==)
        }
    }

    @Test func nestedCodableStructsRoundTrip() throws {
        try withTemporaryDirectory { directory throws in
            let profile = Profile(
                name: "Ada \"the\" Countess", age: 36, tags: ["math", "", "poetry/science"],
                address: Address(street: "12 St James's Square", zip: "SW1Y 4JH"),
                scores: ["analysis": 9.75, "engines": -0.5], nested: [[], [1], [2, 3]])
            try roundTrip(profile, as: Profile.self, in: directory, equal: ==)
        }
    }

    @Test func arraysAndDictionariesRoundTrip() throws {
        try withTemporaryDirectory { directory throws in
            try roundTrip([1, 2, 3, -4], as: [Int].self, in: directory, equal: ==)
            try roundTrip([Int](), as: [Int].self, in: directory, equal: ==)
            try roundTrip(["a", "b\n", "ç"], as: [String].self, in: directory, equal: ==)
            try roundTrip(["one": 1, "two": 2, "": 0], as: [String: Int].self, in: directory, equal: ==)
            try roundTrip(["x": [1.5], "y": []], as: [String: [Double]].self, in: directory, equal: ==)
            try roundTrip([[String: Bool]](), as: [[String: Bool]].self, in: directory, equal: ==)
        }
    }

    @Test(arguments: [0, 1, 2, 3, 255, 4096, 100_000])
    func dataRoundTripsByteForByte(count: Int) throws {
        let seed = SeededGenerator.makeSeed()
        var generator = SeededGenerator(seed: seed)
        let value = Data.random(count: count, using: &generator)
        try withTemporaryDirectory { directory throws in
            try roundTrip(value, as: Data.self, in: directory) { $0 == $1 }
        }
    }

    @Test func dateRoundTripsExactly() throws {
        try withTemporaryDirectory { directory throws in
            let dates = [
                Date(), Date(timeIntervalSince1970: 0), Date(timeIntervalSinceReferenceDate: -1_234.567_890_123),
                Date(timeIntervalSince1970: 4_102_444_800.5), .distantPast, .distantFuture,
            ]
            try roundTrip(dates, as: [Date].self, in: directory, equal: ==)
        }
    }

    @Test func missingKeyIsNilNotADefault() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "absent") == nil)
            #expect(storage.retrieve(type: String.self, forKey: "absent") == nil)
            #expect(try storage.retrieveOrThrow(type: Profile.self, forKey: "absent") == nil)
            storage.store(1, forKey: "present")
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "absent") == nil)
            #expect(try openStore(directory).retrieveOrThrow(type: Int.self, forKey: "absent") == nil)
        }
    }

    @Test func storeThenReopenReturnsValue() throws {
        try withTemporaryDirectory { directory throws in
            do {
                let storage = openStore(directory)
                storage.store(5, forKey: "a")
                storage.store("hi \"x\"/", forKey: "b")
                storage.store([1, 2, 3], forKey: "c")
                storage.store(Data([0, 1, 2, 255]), forKey: "d")
                storage.store(5, forKey: "a")
            }
            let reopened = openStore(directory)
            #expect(reopened.retrieve(type: Int.self, forKey: "a") == 5)
            #expect(reopened.retrieve(type: String.self, forKey: "b") == "hi \"x\"/")
            #expect(reopened.retrieve(type: [Int].self, forKey: "c") == [1, 2, 3])
            #expect(reopened.retrieve(type: Data.self, forKey: "d") == Data([0, 1, 2, 255]))
            #expect(Set(reopened.allKeys.map(\.rawValue)) == ["a", "b", "c", "d"])
        }
    }

    @Test func overwritesAreVisibleToTheWriterAndAfterReopen() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            for value in 0..<100 {
                storage.store(value, forKey: "counter")
                #expect(storage.retrieve(type: Int.self, forKey: "counter") == value)
            }
            #expect(openStore(directory).retrieve(type: Int.self, forKey: "counter") == 99)
        }
    }

    @Test func oneKeyReadAsTwoTypesGivesBothAnswers() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.store(5, forKey: "n")
            #expect(storage.retrieve(type: Int.self, forKey: "n") == 5)
            #expect(storage.retrieve(type: Double.self, forKey: "n") == 5.0)
            #expect(storage.retrieve(type: Int.self, forKey: "n") == 5)
            storage.store(6, forKey: "n")
            #expect(storage.retrieve(type: Double.self, forKey: "n") == 6.0)
            #expect(storage.retrieve(type: Int.self, forKey: "n") == 6)
        }
    }

    final class Box: Codable {
        var items: [Int]
        init(items: [Int]) { self.items = items }
    }

    final class FrozenBox: Codable, Sendable {
        let items: [Int]
        init(items: [Int]) { self.items = items }
    }

    @Test func classInstancesAreNeverSharedBetweenReads() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.store(Box(items: [1, 2]), forKey: "box")
            let first = try #require(storage.retrieve(type: Box.self, forKey: "box"))
            first.items.append(3)
            let second = try #require(storage.retrieve(type: Box.self, forKey: "box"))
            #expect(first !== second)
            #expect(second.items == [1, 2])

            storage.store(FrozenBox(items: [4]), forKey: "frozen")
            let a = try #require(storage.retrieve(type: FrozenBox.self, forKey: "frozen"))
            let b = try #require(storage.retrieve(type: FrozenBox.self, forKey: "frozen"))
            #expect(a !== b)
            #expect(b.items == [4])
        }
    }

    @Test func stringBackedEnumKeysWork() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.store(364, forKey: AppKey.streak)
            storage.store("Ada", forKey: AppKey.userName)
            #expect(storage.retrieve(type: Int.self, forKey: AppKey.streak) == 364)
            // The enum's raw value is the stored name, so a String key reads the same value.
            #expect(storage.retrieve(type: String.self, forKey: "user.name") == "Ada")
            #expect(storage.contains(AppKey.streak))
            #expect(Set(storage.allKeys.map(\.rawValue)) == ["streak", "user.name"])
            storage.bulkStore(items: [AppKey.streak: 365, AppKey.userName: "Grace"])
            let reopened = openStore(directory)
            #expect(reopened.integer(forKey: AppKey.streak) == 365)
            #expect(reopened.retrieve(type: String.self, forKey: AppKey.userName) == "Grace")
            reopened.remove(key: AppKey.streak)
            #expect(!openStore(directory).contains(AppKey.streak))
        }
    }

    @Test func validKeysAtTheLimitsWork() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let keys = [
                String(repeating: "k", count: TinyStorage.maximumKeyLength),
                String(repeating: "é", count: TinyStorage.maximumKeyLength / 2),  // 2 bytes each
                "x", "with space", "slash/in/key", "../not-a-path", "日本", "🔑", "\n",
            ]
            for (index, key) in keys.enumerated() { try storage.storeOrThrow(index, forKey: key) }
            let reopened = openStore(directory)
            for (index, key) in keys.enumerated() {
                #expect(
                    try reopened.retrieveOrThrow(type: Int.self, forKey: key) == index, "key \(key.debugDescription)")
            }
            #expect(reopened.allKeys.count == keys.count)
        }
    }
}
