import Foundation
import Testing

@testable import TinyStorage

/// The TinyStorage 2 spellings: allKeys, contains, remove, reset, bool, integer, incrementInteger,
/// bulkStore.
@Suite struct CompatibilityAPITests {
    @Test func allKeysAndContainsFollowStoresAndRemoves() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            #expect(storage.allKeys.isEmpty)
            #expect(!storage.contains("a"))
            storage.store(1, forKey: "a")
            storage.store("two", forKey: "b")
            #expect(storage.contains("a"))
            #expect(Set(storage.allKeys.map(\.rawValue)) == ["a", "b"])
            storage.remove(key: "a")
            #expect(!storage.contains("a"))
            #expect(storage.allKeys.map(\.rawValue) == ["b"])
            storage.remove(key: "never-stored")
            #expect(storage.allKeys.map(\.rawValue) == ["b"])
            let reopened = openStore(directory)
            #expect(reopened.allKeys.map(\.rawValue) == ["b"])
            #expect(!reopened.contains("a"))
        }
    }

    @Test func resetRemovesEveryKeyDurably() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            for index in 0..<20 { storage.store(index, forKey: "key\(index)") }
            storage.reset()
            #expect(storage.allKeys.isEmpty)
            #expect(openStore(directory).allKeys.isEmpty)
            // The store keeps working after a reset.
            storage.store(7, forKey: "after")
            #expect(openStore(directory).allKeys.map(\.rawValue) == ["after"])
        }
    }

    @Test func resetOfAnEmptyStoreWritesNothing() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let size = try committedLength(storage.fileURL)
            storage.reset()
            try storage.resetOrThrow()
            #expect(try committedLength(storage.fileURL) == size)
        }
    }

    @Test func boolAndIntegerAnswerStoredValuesOrFalseAndZero() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            #expect(storage.bool(forKey: "flag") == false)
            #expect(storage.integer(forKey: "count") == 0)
            storage.store(true, forKey: "flag")
            storage.store(41, forKey: "count")
            #expect(storage.bool(forKey: "flag") == true)
            #expect(storage.integer(forKey: "count") == 41)
            storage.store(false, forKey: "flag")
            storage.store(-3, forKey: "count")
            let reopened = openStore(directory)
            #expect(reopened.bool(forKey: "flag") == false)
            #expect(reopened.contains("flag"))
            #expect(reopened.integer(forKey: "count") == -3)
            // The wrong type answers the documented fallback and keeps the stored bytes.
            storage.store("text", forKey: "mixed")
            #expect(storage.integer(forKey: "mixed") == 0)
            #expect(storage.bool(forKey: "mixed") == false)
            #expect(storage.retrieve(type: String.self, forKey: "mixed") == "text")
        }
    }

    @Test func incrementIntegerStartsAtZeroAndAddsAnyAmount() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            #expect(storage.incrementInteger(forKey: "n") == 1)
            #expect(storage.incrementInteger(forKey: "n") == 2)
            #expect(storage.incrementInteger(forKey: "n", by: 10) == 12)
            #expect(storage.incrementInteger(forKey: "n", by: -20) == -8)
            #expect(storage.incrementInteger(forKey: "n", by: 0) == -8)
            #expect(storage.incrementInteger(forKey: "fresh", by: -5) == -5)
            #expect(try storage.incrementIntegerOrThrow(forKey: "n", by: 8) == 0)
            let reopened = openStore(directory)
            #expect(reopened.integer(forKey: "n") == 0)
            #expect(reopened.integer(forKey: "fresh") == -5)
            #expect(reopened.incrementInteger(forKey: "fresh") == -4)
        }
    }

    @Test func incrementIntegerRefusesNonIntegersAndOverflowWithoutWriting() throws {
        try withTemporaryDirectory { directory throws in
            let logger = TestLogger()
            let storage = openStore(directory, logger: logger)
            storage.store("streak", forKey: "text")
            storage.store(Int.max, forKey: "big")
            storage.store(Int.min, forKey: "small")
            storage.store(Int.min + 1, forKey: "low")
            let size = try committedLength(storage.fileURL)

            // Issue 34, item 9: 2.x wrote the increment over a non-integer; this keeps the stored
            // value, returns a value no count takes, and logs why, naming the key.
            #expect(storage.incrementInteger(forKey: "text") == TinyStorage.incrementFailed)
            #expect(
                logger.texts(atLeast: .error).contains { $0.contains("decodingFailed") && $0.contains("text") },
                "\(logger.texts(atLeast: .error))")
            expectError(.decodingFailed) { try storage.incrementIntegerOrThrow(forKey: "text") }
            #expect(storage.retrieve(type: String.self, forKey: "text") == "streak")

            // No increment leaves a count at Int.min, so `incrementFailed` is never a real count.
            #expect(storage.incrementInteger(forKey: "low", by: -1) == TinyStorage.incrementFailed)
            expectError(.encodingFailed) { try storage.incrementIntegerOrThrow(forKey: "low", by: -1) }
            #expect(storage.integer(forKey: "low") == Int.min + 1)

            #expect(storage.incrementInteger(forKey: "big") == TinyStorage.incrementFailed)
            expectError(.encodingFailed) { try storage.incrementIntegerOrThrow(forKey: "big", by: 1) }
            expectError(.encodingFailed) { try storage.incrementIntegerOrThrow(forKey: "small", by: -1) }
            #expect(storage.integer(forKey: "big") == Int.max)
            #expect(storage.integer(forKey: "small") == Int.min)
            #expect(try committedLength(storage.fileURL) == size)
        }
    }

    @Test func bulkStoreWritesEveryItem() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.store(1, forKey: "existing")
            storage.bulkStore(items: ["existing": 2, "name": "Ada", "flag": true, "list": [1, 2]])
            let reopened = openStore(directory)
            #expect(reopened.integer(forKey: "existing") == 2)
            #expect(reopened.retrieve(type: String.self, forKey: "name") == "Ada")
            #expect(reopened.bool(forKey: "flag"))
            #expect(reopened.retrieve(type: [Int].self, forKey: "list") == [1, 2])
            #expect(reopened.allKeys.count == 4)
        }
    }

    @Test func bulkStoreSkippingPresentKeysRegistersDefaults() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.store(365, forKey: "streak")
            storage.store(false, forKey: "onboarded")
            storage.bulkStore(
                items: ["streak": 0, "onboarded": true, "theme": "dark"], skipKeyIfAlreadyPresent: true)
            #expect(storage.integer(forKey: "streak") == 365)
            #expect(storage.bool(forKey: "onboarded") == false)
            #expect(storage.retrieve(type: String.self, forKey: "theme") == "dark")
            let reopened = openStore(directory)
            #expect(reopened.integer(forKey: "streak") == 365)
            #expect(reopened.retrieve(type: String.self, forKey: "theme") == "dark")
            // Registering the same defaults again changes nothing on disk.
            let size = try committedLength(storage.fileURL)
            reopened.bulkStore(items: ["streak": 0, "theme": "light"], skipKeyIfAlreadyPresent: true)
            #expect(try committedLength(storage.fileURL) == size)
        }
    }

    @Test func bulkStoreWithAnInvalidItemStoresNothing() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.store(1, forKey: "a")
            let size = try committedLength(storage.fileURL)
            expectError(.encodingFailed) {
                try storage.bulkStoreOrThrow(items: ["a": 2, "b": 3, "bad": Double.nan])
            }
            expectError(.invalidKey) { try storage.bulkStoreOrThrow(items: ["a": 2, "": 3]) }
            storage.bulkStore(items: ["a": 2, "c": Double.infinity])
            #expect(storage.integer(forKey: "a") == 1)
            #expect(!storage.contains("b"))
            #expect(!storage.contains("c"))
            #expect(try committedLength(storage.fileURL) == size)
        }
    }

    @Test func unchangedWritesAppendNothing() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.store(["x": 1, "y": 2], forKey: "dict")
            storage.store("same", forKey: "s")
            let size = try committedLength(storage.fileURL)
            storage.store(["y": 2, "x": 1], forKey: "dict")  // same value, keys in another order
            storage.store("same", forKey: "s")
            storage.remove(key: "absent")
            storage.bulkStore(items: ["s": "same"])
            #expect(try committedLength(storage.fileURL) == size)
        }
    }
}
