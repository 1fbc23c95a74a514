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
}
