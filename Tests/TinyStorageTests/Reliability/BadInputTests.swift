import Foundation
import Testing

@testable import TinyStorage

/// A value whose `encode(to:)` always throws.
private struct Refusing: Codable, Sendable, Equatable {
    struct Refused: Error {}
    init() {}
    init(from decoder: any Decoder) throws {}
    func encode(to encoder: any Encoder) throws { throw Refused() }
}

private enum BadNameGroup: String, TinyStorageKeyGroup {
    case nul = "a\u{0}b"
}

private enum LongNameGroup: String, TinyStorageKeyGroup {
    static var prefix: String { String(repeating: "p", count: TinyStorage.maximumKeyLength) }
    case token
}

private enum GoodGroup: String, TinyStorageKeyGroup {
    case value, text
}

/// G7 for the entry points `ErrorTests` does not reach: `update` (string and typed keys), typed
/// keys' subscript, `value(for:)`, `contains` and `remove`, key groups, `values(forKey:)`,
/// `autoUpdatingRetrieve`, `TinyStorageItem`, raw access. Invalid keys, values that fail to encode
/// (a throwing `encode(to:)`, non-finite numbers), values over 16 MiB, and reads as the wrong type
/// each give a typed error on the throwing paths, the documented fallback on the others, and never
/// change a byte of the store.
@Suite struct BadInputTests {
    /// A store holding a few values, and a check that its folder is exactly as it was.
    func makeStore(in directory: URL) throws -> (storage: TinyStorage, unchanged: () throws -> Bool) {
        let storage = openStore(directory)
        try storage.storeOrThrow("hello", forKey: "text")
        try storage.storeOrThrow(7, forKey: "number")
        try storage.storeOrThrow("grouped", forKey: "GoodGroup.text")
        let before = try snapshot(of: directory)
        return (storage, { try snapshot(of: directory) == before })
    }

    @Test(arguments: ErrorTests.invalidKeys)
    func invalidKeysAreRefusedByEveryEntryPoint(key: String) async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("TinyStorageTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (storage, unchanged) = try makeStore(in: directory)
        let typed = TinyStorage.Key<Int>(key, default: 4)

        var bodyRan = false
        expectError(.invalidKey) { try storage.update(key, as: Int.self) { _ in bodyRan = true } }
        expectError(.invalidKey) { try storage.update(typed) { _ in bodyRan = true } }
        #expect(!bodyRan)
        expectError(.invalidKey) { try storage.value(for: typed) }
        expectError(.invalidKey) { try storage.storeRawJSON([key: Data("1".utf8)]) }
        expectError(.invalidKey) { try storage.removeOrThrow(key: key) }
        #expect(storage[typed] == 4)
        storage[typed] = 5
        storage.remove(typed)
        #expect(!storage.contains(typed))
        storage.bulkStore(items: [key: 1, "valid": 2])
        #expect(!storage.contains("valid"))

        let item = TinyStorageItem(wrappedValue: 9, key, storage: storage)
        #expect(item.wrappedValue == 9)
        item.wrappedValue = 10
        #expect(item.wrappedValue == 9)

        // A stream for an invalid key ends at once, having yielded nothing.
        var values = storage.values(forKey: key, as: Int.self).makeAsyncIterator()
        #expect(await values.next() == nil)
        var typedValues = storage.values(for: typed).makeAsyncIterator()
        #expect(await typedValues.next() == nil)
        await MainActor.run {
            #expect(storage.autoUpdatingRetrieve(type: Int.self, forKey: key) == nil)
            expectError(.invalidKey) { try storage.autoUpdatingRetrieveOrThrow(type: Int.self, forKey: key) }
        }
        #expect(try unchanged())
    }

    @Test func groupsWhoseStoredNamesAreInvalidAreRefused() throws {
        try withTemporaryDirectory { directory throws in
            let (storage, unchanged) = try makeStore(in: directory)
            for (name, attempt) in [
                (
                    "NUL in a case",
                    { () throws -> Void in
                        let group = storage.group(BadNameGroup.self)
                        try group.storeOrThrow(1, forKey: .nul)
                    }
                ),
                (
                    "prefix too long",
                    { () throws -> Void in
                        let group = storage.group(LongNameGroup.self)
                        try group.storeOrThrow(1, forKey: .token)
                    }
                ),
                (
                    "read",
                    { () throws -> Void in
                        _ = try storage.group(BadNameGroup.self).retrieveOrThrow(type: Int.self, forKey: .nul)
                    }
                ),
                (
                    "update",
                    { () throws -> Void in
                        try storage.group(LongNameGroup.self).update(.token, as: Int.self) { $0 = 1 }
                    }
                ),
            ] {
                let error = expectError(.invalidKey) { try attempt() }
                #expect(error != nil, "\(name)")
            }
            let bad = storage.group(BadNameGroup.self)
            bad.store(1, forKey: .nul)
            bad.remove(key: .nul)
            #expect(!bad.contains(.nul))
            #expect(bad[.nul, default: 3] == 3)
            bad[.nul, default: 3] = 4
            #expect(try unchanged())
        }
    }

    @Test func valuesThatFailToEncodeAreRefusedByEveryEntryPoint() throws {
        try withTemporaryDirectory { directory throws in
            let (storage, unchanged) = try makeStore(in: directory)
            let refusingKey = TinyStorage.Key<Refusing?>("refusing")
            let doubleKey = TinyStorage.Key<Double>("number", default: 0)
            let group = storage.group(GoodGroup.self)

            let refused: [(String, () throws -> Void)] = [
                ("update to a throwing value", { try storage.update("text", as: Refusing.self) { $0 = Refusing() } }),
                ("update to NaN", { try storage.update("number", as: Double.self) { $0 = .nan } }),
                ("typed update to a throwing value", { try storage.update(refusingKey) { $0 = Refusing() } }),
                ("typed update to infinity", { try storage.update(doubleKey) { $0 = .infinity } }),
                ("group update to NaN", { try group.update(.value, as: Float.self) { $0 = .nan } }),
                (
                    "bulk store with one throwing value",
                    { try storage.bulkStoreOrThrow(items: ["a": 1, "text": "new", "bad": Refusing()]) }
                ),
            ]
            for (name, attempt) in refused {
                let error = expectError(.encodingFailed) { try attempt() }
                #expect(error != nil, "\(name)")
            }
            // storeOrThrow, the original library's spelling (and a group's), rethrows the encoder's own error.
            let rethrown: [(String, () throws -> Void)] = [
                ("group store of a throwing value", { try group.storeOrThrow(Refusing(), forKey: .value) }),
                ("group store of -infinity", { try group.storeOrThrow(-Double.infinity, forKey: .value) }),
                ("a Float NaN", { try storage.storeOrThrow(Float.nan, forKey: "float") }),
                ("a NaN in a dictionary", { try storage.storeOrThrow(["x": 1, "y": Double.nan], forKey: "dict") }),
                ("an optional NaN", { try storage.storeOrThrow(Double?.some(.nan), forKey: "optional") }),
            ]
            for (name, attempt) in rethrown {
                do {
                    try attempt()
                    Issue.record("\(name): nothing was thrown")
                } catch {
                    #expect(error is Refusing.Refused || error is EncodingError, "\(name): \(error)")
                }
            }
            // The plain spellings log and write nothing.
            storage[refusingKey] = Refusing()
            storage[doubleKey] = .nan
            group.store(Double.nan, forKey: .value)
            group[.value, default: 0.0] = .infinity
            TinyStorageItem(wrappedValue: 0.0, "number", storage: storage).wrappedValue = .nan
            TinyStorageItem(wrappedValue: Refusing(), "refusing", storage: storage).wrappedValue = Refusing()
            #expect(try unchanged())
        }
    }

    @Test func valuesOverTheSizeLimitAreRefusedByEveryEntryPoint() throws {
        try withTemporaryDirectory { directory throws in
            let (storage, unchanged) = try makeStore(in: directory)
            // A Data value is stored as its bytes: 16 MiB and one byte is over the limit.
            let huge = Data(count: TinyStorage.maximumValueSize + 1)
            let hugeKey = TinyStorage.Key<Data?>("blob")

            expectError(.valueTooLarge) { try storage.update("blob", as: Data.self) { $0 = huge } }
            expectError(.valueTooLarge) { try storage.update(hugeKey) { $0 = huge } }
            expectError(.valueTooLarge) { try storage.group(GoodGroup.self).storeOrThrow(huge, forKey: .value) }
            expectError(.valueTooLarge) {
                try storage.storeRawJSON(["blob": Data(repeating: 0x20, count: TinyStorage.maximumValueSize + 1)])
            }
            storage[hugeKey] = huge
            TinyStorageItem(wrappedValue: Data(), "blob", storage: storage).wrappedValue = huge
            #expect(!storage.contains("blob"))
            #expect(try unchanged())
        }
    }

    /// A value's lifetime (`expiresAfter:`) must be more than zero (a `Duration` is always
    /// finite): every entry point that takes one refuses zero and negative ones with
    /// `.invalidExpiration` on the throwing paths, logs on the others, and writes nothing.
    @Test(arguments: [Duration.zero, .seconds(-3), .nanoseconds(-1)])
    func lifetimesThatAreNotPositiveAreRefusedByEveryEntryPoint(lifetime: Duration) throws {
        try withTemporaryDirectory { directory throws in
            let (storage, unchanged) = try makeStore(in: directory)
            let typed = TinyStorage.Key<Int>("number", default: 0, expiresAfter: lifetime)
            let optional = TinyStorage.Key<String?>("text", expiresAfter: lifetime)

            var bodyRan = false
            let refused: [(String, () throws -> Void)] = [
                ("storeOrThrow", { try storage.storeOrThrow(8, forKey: "number", expiresAfter: lifetime) }),
                ("storeOrThrow of nil", { try storage.storeOrThrow(nil, forKey: "number", expiresAfter: lifetime) }),
                ("bulkStoreOrThrow", { try storage.bulkStoreOrThrow(items: ["a": 1], expiresAfter: lifetime) }),
                ("typed update", { try storage.update(typed) { _ in bodyRan = true } }),
                ("optional typed update", { try storage.update(optional) { $0 = "new" } }),
            ]
            for (name, attempt) in refused {
                let error = expectError(.invalidExpiration) { try attempt() }
                #expect(error?.message.contains("Nothing was written") == true, "\(name)")
            }
            #expect(!bodyRan, "refused before the closure runs")
            storage.store(9, forKey: "number", expiresAfter: lifetime)
            storage.bulkStore(items: ["number": 10], expiresAfter: lifetime)
            storage[typed] = 11
            storage[optional] = nil
            TinyStorageItem(typed, storage: storage).wrappedValue = 12
            #expect(storage[typed] == 7)
            #expect(try unchanged())
        }
    }

    @Test func aNegativeDecodedValueCacheLimitKeepsNothingDecodedAndChangesNothingStored() throws {
        try withTemporaryDirectory { directory throws in
            let (storage, unchanged) = try makeStore(in: directory)
            storage.decodedValueCacheLimit = -1
            #expect(storage.decodedValueCacheLimit == 0, "a negative limit counts as 0")
            let keys = ["text", "GoodGroup.text"]
            #expect(keys.map { storage.retrieve(type: String.self, forKey: $0) } == ["hello", "grouped"])
            #expect(
                keys.allSatisfy {
                    storage.engine.cachedValue(forKey: $0, decodedAs: ObjectIdentifier(String.self)) == nil
                })
            #expect(try unchanged())
        }
    }

    @Test func readsAsTheWrongTypeFailAndKeepTheStoredBytes() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("TinyStorageTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (storage, unchanged) = try makeStore(in: directory)

        var bodyRan = false
        let error = expectError(.decodingFailed) {
            try storage.update("text", as: Int.self) { _ in bodyRan = true }
        }
        #expect(error?.key == "text")
        #expect(!bodyRan, "update ran its body without the stored value")
        expectError(.decodingFailed) {
            try storage.group(GoodGroup.self).retrieveOrThrow(type: [Int].self, forKey: .text)
        }
        expectError(.decodingFailed) {
            try storage.group(GoodGroup.self).update(.text, as: Bool.self) { _ in bodyRan = true }
        }
        #expect(!bodyRan)
        #expect(storage.group(GoodGroup.self)[.text, default: 5] == 5)
        #expect(TinyStorageItem(wrappedValue: 1, "text", storage: storage).wrappedValue == 1)
        await MainActor.run {
            #expect(storage.autoUpdatingRetrieve(type: Int.self, forKey: "text") == nil)
            expectError(.decodingFailed) { try storage.autoUpdatingRetrieveOrThrow(type: Int.self, forKey: "text") }
        }
        #expect(try unchanged())
        #expect(storage.retrieve(type: String.self, forKey: "text") == "hello")

        // A stream of `Int`s skips the stored `String` rather than inventing a value, and
        // yields the first value that is an `Int`.
        var values = storage.values(forKey: "text", as: Int.self).makeAsyncIterator()
        try storage.storeOrThrow(42, forKey: "text")
        #expect(await values.next() == .some(42))
    }

    @Test func anInsideDirectoryThatIsAFileIsUnavailableAndUntouched() throws {
        try withTemporaryDirectory { sandbox throws in
            let file = sandbox.appendingPathComponent("not-a-directory")
            try Data("mine".utf8).write(to: file)
            let storage = openStore(file)
            #expect(!storage.availability.isAvailable)
            expectError(.unavailable) { try storage.storeOrThrow(1, forKey: "k") }
            #expect(try Data(contentsOf: file) == Data("mine".utf8))
            #expect(allPaths(below: sandbox) == ["not-a-directory"])
        }
    }
}
