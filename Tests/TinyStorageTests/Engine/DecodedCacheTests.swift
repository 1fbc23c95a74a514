import Foundation
import Testing

@testable import TinyStorage

/// The decoded-value cache behind cached reads (issue 12): a value read once is served from
/// memory to every read path that asks for it, plain or typed, and never after it changed.
@Suite struct DecodedCacheTests {
    /// A key's entry takes 48 bytes on a 64-bit platform, its fields ordered so the value's kind
    /// fills padding (56 otherwise): part of the memory a store holds per key.
    @Test func anEntryTakesFortyEightBytes() {
        #expect(MemoryLayout<CachedEntry>.stride == 48)
    }

    @Test func anIntReadOnceIsCachedForPlainAndTypedReads() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow(5, forKey: "k")
            #expect(storage.engine.cachedInt(forKey: "k") == nil, "nothing is decoded before a read")

            #expect(storage.retrieve(type: Int.self, forKey: "k") == 5)
            // The plain read's path (no box) and the typed keys' path (a box) both hit.
            #expect(storage.engine.cachedInt(forKey: "k") == 5)
            let box = storage.engine.cachedValue(forKey: "k", decodedAs: ObjectIdentifier(Int.self))
            #expect(box.map { unsafeDowncast($0, to: _DecodedValue<Int>.self).value } == 5)
            #expect(storage.engine.cachedValue(forKey: "k", decodedAs: ObjectIdentifier(Double.self)) == nil)

            try storage.storeOrThrow(6, forKey: "k")
            #expect(storage.engine.cachedInt(forKey: "k") == nil, "a changed value is decoded again")
            #expect(storage.retrieve(type: Int.self, forKey: "k") == 6)
            #expect(storage.engine.cachedInt(forKey: "k") == 6)
        }
    }

    @Test func otherTypesAreCachedInABoxForTheirOwnTypeOnly() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow("hello", forKey: "s")
            #expect(storage.retrieve(type: String.self, forKey: "s") == "hello")
            let box = storage.engine.cachedValue(forKey: "s", decodedAs: ObjectIdentifier(String.self))
            #expect(box.map { unsafeDowncast($0, to: _DecodedValue<String>.self).value } == "hello")
            #expect(storage.engine.cachedInt(forKey: "s") == nil)
        }
    }

    // MARK: The limit (issue 32: memory a widget can afford)

    /// The keys whose values are kept decoded (as `String`), of `keys`.
    static func decodedKeys(_ storage: TinyStorage, _ keys: [String]) -> [String] {
        keys.filter { storage.engine.cachedValue(forKey: $0, decodedAs: ObjectIdentifier(String.self)) != nil }
    }

    /// `count` keys holding a JSON string of 1,000 bytes (1,002 stored), each read once.
    static func fillAndRead(_ storage: TinyStorage, count: Int) throws -> [String] {
        let keys = (0..<count).map { "key-\($0)" }
        for (index, key) in keys.enumerated() {
            try storage.storeOrThrow(String(repeating: String(index % 10), count: 1_000), forKey: key)
        }
        for key in keys { _ = storage.retrieve(type: String.self, forKey: key) }
        return keys
    }

    @Test func theDefaultLimitIsTwoMebibytes() {
        #expect(TinyStorage.inMemory().decodedValueCacheLimit == 2 << 20)
    }

    @Test func valuesKeptDecodedStayWithinTheLimitAndEveryReadStaysRight() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.decodedValueCacheLimit = 10_000
            let keys = try Self.fillAndRead(storage, count: 50)
            let kept = Self.decodedKeys(storage, keys)
            #expect(!kept.isEmpty, "values are still kept")
            #expect(kept.count * 1_002 <= 10_000, "\(kept.count) values of 1,002 bytes kept")
            for (index, key) in keys.enumerated() {
                #expect(
                    storage.retrieve(type: String.self, forKey: key)
                        == String(repeating: String(index % 10), count: 1_000))
            }
        }
    }

    @Test func withoutALimitEveryValueReadIsKept() throws {
        let storage = TinyStorage.inMemory()
        storage.decodedValueCacheLimit = .max
        let keys = try Self.fillAndRead(storage, count: 3_000)
        #expect(Self.decodedKeys(storage, keys).count == 3_000, "3 MB kept: past the default")
    }

    @Test func loweringTheLimitDropsValuesAtOnceAndZeroKeepsNone() throws {
        let storage = TinyStorage.inMemory()
        let keys = try Self.fillAndRead(storage, count: 100)
        #expect(Self.decodedKeys(storage, keys).count == 100)
        storage.decodedValueCacheLimit = 20_000
        #expect(Self.decodedKeys(storage, keys).count * 1_002 <= 20_000)
        storage.decodedValueCacheLimit = 0
        #expect(Self.decodedKeys(storage, keys).isEmpty)
        #expect(storage.retrieve(type: String.self, forKey: "key-7") == String(repeating: "7", count: 1_000))
        #expect(Self.decodedKeys(storage, keys).isEmpty, "a read with a limit of 0 keeps nothing")
    }

    @Test func aValueLargerThanTheLimitIsNeverKept() throws {
        let storage = TinyStorage.inMemory()
        storage.decodedValueCacheLimit = 500
        try storage.storeOrThrow("short", forKey: "small")
        try storage.storeOrThrow(String(repeating: "x", count: 1_000), forKey: "large")
        _ = storage.retrieve(type: String.self, forKey: "small")
        _ = storage.retrieve(type: String.self, forKey: "large")
        #expect(Self.decodedKeys(storage, ["small", "large"]) == ["small"])
    }

    @Test func theLimitSurvivesAReplacedFile() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.decodedValueCacheLimit = 10_000
            _ = try Self.fillAndRead(storage, count: 20)
            // Another instance replaces the file: this one reads the new file into a fresh index.
            try openStore(directory).compactNow()
            #expect(storage.decodedValueCacheLimit == 10_000)
            let keys = try Self.fillAndRead(storage, count: 20)
            #expect(Self.decodedKeys(storage, keys).count * 1_002 <= 10_000)
        }
    }
}
