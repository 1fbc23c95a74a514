import Foundation
import Testing

@testable import TinyStorage

extension TinyStorage.Key where Value == Int {
    fileprivate static var refreshMinutes: Self { .init("refreshMinutes", default: 5) }
}

extension TinyStorage.Key where Value == String {
    fileprivate static var language: Self { .init("language", default: "en") }
}

/// `bulkStore(items:skipKeyIfAlreadyPresent: true)` registers defaults on disk; typed-key defaults
/// are a read-side fallback; a stored value always wins.
@Suite struct RegisterDefaultsTests {
    @Test func registeringDefaultsWritesOnlyMissingKeysAndOtherInstancesSeeThem() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.store(30, forKey: "refreshMinutes")
            storage.bulkStore(
                items: ["refreshMinutes": 10, "language": "fr"] as [String: any Encodable],
                skipKeyIfAlreadyPresent: true)
            #expect(storage.retrieve(type: Int.self, forKey: "refreshMinutes") == 30)
            #expect(storage.retrieve(type: String.self, forKey: "language") == "fr")

            // Written on disk: another instance (as another process would) reads them.
            let other = openStore(directory)
            #expect(other.retrieve(type: String.self, forKey: "language") == "fr")
            #expect(other[.refreshMinutes] == 30)
        }
    }

    @Test func aRegisteredDefaultWinsOverTheTypedDefault() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            #expect(storage[.language] == "en")
            storage.bulkStore(items: ["language": "fr"] as [String: any Encodable], skipKeyIfAlreadyPresent: true)
            #expect(storage[.language] == "fr")
            #expect(try storage.value(for: .language) == "fr")
        }
    }

    @Test func aStoredValueWinsOverBothDefaults() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage[.refreshMinutes] = 60
            storage.bulkStore(
                items: ["refreshMinutes": 10] as [String: any Encodable], skipKeyIfAlreadyPresent: true)
            #expect(storage[.refreshMinutes] == 60)
            storage.remove(.refreshMinutes)
            #expect(storage[.refreshMinutes] == 5)
        }
    }

    @Test func typedDefaultsAreNeverWritten() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            _ = storage[.refreshMinutes]
            _ = try storage.value(for: .language)
            try storage.update(.refreshMinutes) { _ in }
            #expect(try storage.rawJSON().isEmpty)
            #expect(!openStore(directory).contains(.refreshMinutes))
        }
    }
}
