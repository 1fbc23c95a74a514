import Foundation
import Testing

@testable import TinyStorage

/// G7: bad input gets a typed error and nothing else: no crash, no partial write.
@Suite struct ErrorTests {
    static let invalidKeys = [
        "", "\u{0}", "a\u{0}b", String(repeating: "x", count: TinyStorage.maximumKeyLength + 1),
        String(repeating: "é", count: TinyStorage.maximumKeyLength / 2) + "x",  // 1025 bytes of UTF-8
    ]

    @Test(arguments: invalidKeys)
    func invalidKeysAreRefusedAndNothingIsWritten(key: String) throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.store(1, forKey: "valid")
            let size = try committedLength(storage.fileURL)

            expectError(.invalidKey) { try storage.storeOrThrow(5, forKey: key) }
            expectError(.invalidKey) { try storage.storeOrThrow(nil, forKey: key) }
            expectError(.invalidKey) { try storage.retrieveOrThrow(type: Int.self, forKey: key) }
            expectError(.invalidKey) { try storage.incrementIntegerOrThrow(forKey: key) }
            expectError(.invalidKey) { try storage.bulkStoreOrThrow(items: [key: 1, "other": 2]) }
            expectError(.invalidKey) { try storage.rawJSON(forKey: key) }
            let error = expectError(.invalidKey) { try storage.storeOrThrow(5, forKey: key) }
            #expect(error?.key == key)

            // The non-throwing spellings log and do nothing.
            storage.store(5, forKey: key)
            storage.remove(key: key)
            #expect(storage.retrieve(type: Int.self, forKey: key) == nil)
            #expect(!storage.contains(key))
            #expect(storage.incrementInteger(forKey: key) == TinyStorage.incrementFailed)

            #expect(try committedLength(storage.fileURL) == size)
            #expect(storage.allKeys.map(\.rawValue) == ["valid"])
            #expect(openStore(directory).allKeys.map(\.rawValue) == ["valid"])
        }
    }

    /// A refused key's message names the first rule it breaks, in the order ``TinyStorageKey``
    /// lists them; keys at the limits are accepted, whatever their type.
    @Test func anInvalidKeysMessageNamesTheFirstRuleItBreaks() throws {
        let tooLong = String(repeating: "x", count: TinyStorage.maximumKeyLength + 1)
        let cases = [
            ("", "is empty"),
            ("a\u{0}b", "contains a NUL character"),
            (tooLong + "\u{0}", "contains a NUL character"),
            (tooLong, "is longer than \(TinyStorage.maximumKeyLength) bytes"),
        ]
        for (key, problem) in cases {
            let existential: any TinyStorageKey = key
            let errors = [
                expectError(.invalidKey) { try TinyStorage.validatedName(of: key) },
                expectError(.invalidKey) { try TinyStorage.validatedName(of: existential) },
            ]
            for error in errors {
                #expect(error?.message == "The key \(problem). Nothing was read or written.")
                #expect(error?.key == key)
            }
        }
        let longest = String(repeating: "é", count: TinyStorage.maximumKeyLength / 2)
        for key in ["k", "key-000500", longest, String(repeating: "a", count: 15), String(repeating: "a", count: 16)] {
            #expect(try TinyStorage.validatedName(of: key) == key)
            let existential: any TinyStorageKey = key
            #expect(try TinyStorage.validatedName(of: existential) == key)
        }
    }

    struct Measurement: Codable, Sendable {
        var label: String
        var value: Double
    }

    struct Unencodable: Encodable {
        struct Refused: Error {}
        func encode(to encoder: any Encoder) throws { throw Refused() }
    }

    @Test(arguments: [Double.nan, .infinity, -.infinity, .signalingNaN])
    func nonFiniteDoublesFailToEncode(value: Double) throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.store(1.5, forKey: "d")
            let size = try committedLength(storage.fileURL)
            // Our own entry points wrap the encoder's error in .encodingFailed.
            let error = expectError(.encodingFailed) { try storage.bulkStoreOrThrow(items: ["d": value]) }
            #expect(error?.underlying is EncodingError)
            expectError(.encodingFailed) { try storage.update("d", as: Double.self) { $0 = value } }
            // The original library's spelling rethrows what JSONEncoder threw.
            #expect(throws: EncodingError.self) { try storage.storeOrThrow(value, forKey: "d") }
            #expect(throws: EncodingError.self) {
                try storage.storeOrThrow(Measurement(label: "x", value: value), forKey: "m")
            }
            #expect(throws: EncodingError.self) { try storage.storeOrThrow([1.0, value], forKey: "list") }
            storage.store(value, forKey: "d")
            #expect(storage.retrieve(type: Double.self, forKey: "d") == 1.5)
            #expect(!storage.contains("m"))
            #expect(try committedLength(storage.fileURL) == size)
        }
    }

    @Test func aThrowingEncodeFailsWithTheCause() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            // Our other entry points wrap it in .encodingFailed, with the cause and the key.
            let error = expectError(.encodingFailed) { try storage.bulkStoreOrThrow(items: ["u": Unencodable()]) }
            #expect(error?.underlying is Unencodable.Refused)
            #expect(error?.key == "u")
            // storeOrThrow, as in the original library, rethrows the value's own error unchanged.
            #expect(throws: Unencodable.Refused.self) { try storage.storeOrThrow(Unencodable(), forKey: "u") }
            #expect(!storage.contains("u"))
        }
    }

    @Test func valuesOverTheSizeLimitAreRefused() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.store("small", forKey: "v")
            let size = try committedLength(storage.fileURL)
            // JSON adds two quotes: the encoded value is two bytes over the limit.
            let tooLarge = String(repeating: "a", count: TinyStorage.maximumValueSize)
            expectError(.valueTooLarge) { try storage.storeOrThrow(tooLarge, forKey: "v") }
            expectError(.valueTooLarge) { try storage.bulkStoreOrThrow(items: ["v": tooLarge, "w": 1]) }
            expectError(.valueTooLarge) { try storage.storeOrThrow([tooLarge], forKey: "list") }
            storage.store(tooLarge, forKey: "v")
            #expect(storage.retrieve(type: String.self, forKey: "v") == "small")
            #expect(!storage.contains("w"))
            #expect(try committedLength(storage.fileURL) == size)
            #expect(openStore(directory).retrieve(type: String.self, forKey: "v") == "small")
        }
    }

    @Test func aValueExactlyAtTheSizeLimitIsStored() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let largest = String(repeating: "b", count: TinyStorage.maximumValueSize - 2)
            try storage.storeOrThrow(largest, forKey: "v")
            #expect(try storage.rawJSON(forKey: "v")?.count == TinyStorage.maximumValueSize)
            #expect(openStore(directory).retrieve(type: String.self, forKey: "v")?.utf8.count == largest.utf8.count)
        }
    }

    @Test func readingAsTheWrongTypeFailsAndKeepsTheStoredBytes() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.store("hello", forKey: "s")
            storage.store(Measurement(label: "t", value: 2), forKey: "m")
            let stringBytes = try #require(try storage.rawJSON(forKey: "s"))
            let structBytes = try #require(try storage.rawJSON(forKey: "m"))

            let error = expectError(.decodingFailed) { try storage.retrieveOrThrow(type: Int.self, forKey: "s") }
            #expect(error?.key == "s")
            #expect(error?.underlying is DecodingError)
            expectError(.decodingFailed) { try storage.retrieveOrThrow(type: [String].self, forKey: "s") }
            expectError(.decodingFailed) { try storage.retrieveOrThrow(type: String.self, forKey: "m") }
            expectError(.decodingFailed) { try storage.retrieveOrThrow(type: Bool.self, forKey: "m") }
            #expect(storage.retrieve(type: Int.self, forKey: "s") == nil)

            #expect(try storage.rawJSON(forKey: "s") == stringBytes)
            #expect(try storage.rawJSON(forKey: "m") == structBytes)
            #expect(storage.retrieve(type: String.self, forKey: "s") == "hello")
            let reopened = openStore(directory)
            #expect(try reopened.rawJSON(forKey: "s") == stringBytes)
            #expect(reopened.retrieve(type: Measurement.self, forKey: "m")?.value == 2)
        }
    }

    @Test func errorDescriptionsNeverPrintStoredValues() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.store("secret-value-1234", forKey: "token")
            let error = expectError(.decodingFailed) { try storage.retrieveOrThrow(type: Int.self, forKey: "token") }
            let description = try #require(error).description
            #expect(description.contains("token"))
            #expect(!description.contains("secret-value-1234"))
        }
    }

    @Test func errorCodesMatchInCatchClauses() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            var caught = false
            do {
                try storage.storeOrThrow(1, forKey: "")
            } catch TinyStorageError.Code.unavailable {
                Issue.record("an invalid key is not unavailability")
            } catch TinyStorageError.Code.invalidKey {
                caught = true
            } catch {
                Issue.record("unexpected \(error)")
            }
            #expect(caught)
            #expect(!(TinyStorageError.Code.invalidKey ~= CocoaError(.fileNoSuchFile)))
        }
    }

    @Test func unavailableStoresThrowUnavailableInCatchClauses() throws {
        try withTemporaryDirectory { directory throws in
            // A plain file where the store's folder should be: the store cannot be opened.
            let blocker = directory.appendingPathComponent("store")
            try Data("not a directory".utf8).write(to: blocker)
            let storage = openStore(directory)
            var caught = false
            do {
                _ = try storage.retrieveOrThrow(type: Int.self, forKey: "streak")
                Issue.record("an unreadable store must not answer")
            } catch TinyStorageError.Code.unavailable {
                caught = true
            } catch {
                Issue.record("unexpected \(error)")
            }
            #expect(caught)
            #expect(!storage.availability.isAvailable)
            #expect(try Data(contentsOf: blocker) == Data("not a directory".utf8))
        }
    }

    static let invalidNames = ["", ".", "..", "a/b", "../x", "/", "x/", "a\u{0}b", String(repeating: "n", count: 256)]

    @Test(arguments: invalidNames)
    func invalidStoreNamesAreUnavailableAndTouchNothing(name: String) throws {
        try withTemporaryDirectory { sandbox throws in
            let inside = sandbox.appendingPathComponent("inside", isDirectory: true)
            try FileManager.default.createDirectory(at: inside, withIntermediateDirectories: true)
            let before = allPaths(below: sandbox)

            let storage = TinyStorage(insideDirectory: inside, name: name, logger: TestLogger())
            let error = try #require(unavailabilityError(storage), "name \(name.debugDescription) was accepted")
            #expect(error.code == .invalidName)

            do {
                _ = try storage.retrieveOrThrow(type: Int.self, forKey: "k")
                Issue.record("a store with an invalid name answered a read")
            } catch let error as TinyStorageError {
                let cause = (error.underlying as? TinyStorageError)?.code
                #expect(error.code == .invalidName || (error.code == .unavailable && cause == .invalidName), "\(error)")
            }
            #expect(throws: TinyStorageError.self) { try storage.storeOrThrow(1, forKey: "k") }
            #expect(throws: TinyStorageError.self) { try storage.resetOrThrow() }
            storage.store(1, forKey: "k")
            storage.bulkStore(items: ["a": 1])
            storage.reset()
            #expect(storage.incrementInteger(forKey: "n") == TinyStorage.incrementFailed)
            #expect(storage.allKeys.isEmpty)
            #expect(!storage.contains("k"))

            #expect(allPaths(below: sandbox) == before, "files appeared for name \(name.debugDescription)")
        }
    }
}
