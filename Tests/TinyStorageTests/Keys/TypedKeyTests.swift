import Foundation
import Testing

@testable import TinyStorage

private struct Profile: Codable, Sendable, Equatable {
    var name: String
    var joined: Date
}

extension TinyStorage.Key where Value == Int {
    fileprivate static var streak: Self { .init("streak", default: 0) }
    fileprivate static var launches: Self { .init("launches", default: 10) }
}

extension TinyStorage.Key where Value == String {
    fileprivate static var theme: Self { .init("theme", default: "system") }
}

extension TinyStorage.Key where Value == String? {
    fileprivate static var lastUser: Self { .init("lastUser") }
}

extension TinyStorage.Key where Value == Profile? {
    fileprivate static var profile: Self { .init("profile") }
}

extension TinyStorage.Key where Value == [String] {
    fileprivate static var recents: Self { .init("recents", default: []) }
}

/// Typed keys: declared once with their default, read as `storage[.streak]`.
@Suite struct TypedKeyTests {
    @Test func typedKeysRoundTripAcrossReopen() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let profile = Profile(name: "Ada", joined: Date(timeIntervalSince1970: 1_700_000_000))
            storage[.streak] = 365
            storage[.theme] = "dark"
            storage[.lastUser] = "ada"
            storage[.profile] = profile
            storage[.recents] = ["a", "b"]

            let reopened = openStore(directory)
            #expect(reopened[.streak] == 365)
            #expect(reopened[.theme] == "dark")
            #expect(reopened[.lastUser] == "ada")
            #expect(reopened[.profile] == profile)
            #expect(reopened[.recents] == ["a", "b"])
            #expect(try reopened.value(for: .streak) == 365)
            // Stored like any value: the string-key API reads the same bytes.
            #expect(reopened.retrieve(type: Int.self, forKey: "streak") == 365)
        }
    }

    @Test func absentKeysReadTheirDefaultAndWriteNothing() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            #expect(storage[.streak] == 0)
            #expect(storage[.launches] == 10)
            #expect(storage[.recents] == [])
            #expect(try storage.value(for: .launches) == 10)
            #expect(!storage.contains(.launches))
            #expect(try storage.rawJSON().isEmpty)
            #expect(openStore(directory).allKeys.isEmpty)
        }
    }

    @Test func optionalKeysDefaultToNilAndSettingNilRemoves() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            #expect(TinyStorage.Key<String?>.lastUser.defaultValue == nil)
            #expect(storage[.lastUser] == nil)
            #expect(try storage.value(for: .lastUser) == nil)

            storage[.lastUser] = "grace"
            #expect(storage[.lastUser] == "grace")
            #expect(try storage.rawJSON(forKey: "lastUser") == Data("\"grace\"".utf8))

            storage[.lastUser] = nil
            #expect(storage[.lastUser] == nil)
            // Removed, not stored as JSON null.
            #expect(try storage.rawJSON(forKey: "lastUser") == nil)
            #expect(!storage.contains(.lastUser))
        }
    }

    @Test func typeMismatchThrowsDecodingFailedAndReadsDefaultKeepingTheBytes() throws {
        try withTemporaryDirectory { directory throws in
            let logger = TestLogger()
            let storage = openStore(directory, logger: logger)
            storage.store("not a number", forKey: "streak")
            let before = try #require(try storage.rawJSON(forKey: "streak"))

            let error = expectError(.decodingFailed) { try storage.value(for: .streak) }
            #expect(error?.key == "streak")
            #expect(storage[.streak] == 0)
            #expect(logger.texts(atLeast: .error).contains { $0.contains("decodingFailed") })
            expectError(.decodingFailed) { try storage.update(.streak) { $0 += 1 } }

            #expect(try storage.rawJSON(forKey: "streak") == before)
            #expect(try openStore(directory).rawJSON(forKey: "streak") == before)
            #expect(storage.retrieve(type: String.self, forKey: "streak") == "not a number")
        }
    }

    @Test func typedUpdateStartsFromTheDefault() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let result = try storage.update(.launches) { launches -> Int in
                launches += 1
                return launches
            }
            #expect(result == 11)
            #expect(try openStore(directory).value(for: .launches) == 11)
        }
    }

    @Test func typedUpdateLeavingTheDefaultWritesNothing() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.update(.launches) { launches in launches += 0 }
            try storage.update(.recents) { _ in }
            #expect(try storage.rawJSON().isEmpty)
        }
    }

    @Test func typedUpdateSettingNilRemovesAnOptionalKey() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage[.lastUser] = "ada"
            try storage.update(.lastUser) { user in
                #expect(user == "ada")
                user = nil
            }
            #expect(try storage.rawJSON(forKey: "lastUser") == nil)
        }
    }

    @Test func typedUpdateThatThrowsWritesNothing() throws {
        struct Refused: Error {}
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage[.streak] = 3
            #expect(throws: Refused.self) {
                try storage.update(.streak) { streak in
                    streak = 99
                    throw Refused()
                }
            }
            #expect(storage[.streak] == 3)
        }
    }

    @Test func concurrentTypedUpdatesFromManyTasksEndExact() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("TinyStorageTests-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // Two instances on one directory: updates must also be atomic between them, as between processes.
        let stores = [openStore(directory), openStore(directory)]
        let tasks = 16
        let updates = 100
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<tasks {
                group.addTask {
                    let storage = stores[task % stores.count]
                    for _ in 0..<updates { try storage.update(.launches) { $0 += 1 } }
                }
            }
            try await group.waitForAll()
        }
        #expect(try stores[0].value(for: .launches) == 10 + tasks * updates)
        #expect(try stores[1].value(for: .launches) == 10 + tasks * updates)
        #expect(try openStore(directory).value(for: .launches) == 10 + tasks * updates)
    }

    @Test func typedKeysWorkWithEveryStringKeyAPI() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let streak = TinyStorage.Key<Int>.streak
            storage.store(7, forKey: streak)
            #expect(storage.retrieve(type: Int.self, forKey: streak) == 7)
            #expect(storage.contains(streak))
            #expect(storage.allKeys.map(\.rawValue) == ["streak"])
            #expect(storage.incrementInteger(forKey: streak) == 8)
            storage.remove(.streak)
            #expect(!storage.contains(.streak))
            #expect(storage[.streak] == 0)
        }
    }

    @Test func keysAreEqualByNameAlone() {
        let a = TinyStorage.Key<Int>("n", default: 1)
        let b = TinyStorage.Key<Int>("n", default: 2)
        #expect(a == b)
        #expect(Set([a, b]).count == 1)
        #expect(a != TinyStorage.Key<Int>("m", default: 1))
        #expect(a.name == "n")
    }

    @Test func invalidTypedKeyNamesAreRefused() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let empty = TinyStorage.Key<Int>("", default: 4)
            expectError(.invalidKey) { try storage.value(for: empty) }
            storage[empty] = 5
            #expect(storage[empty] == 4)
            #expect(try storage.rawJSON().isEmpty)
        }
    }

    @Test func unavailableStoreThrowsUnavailableAndReadsTheDefault() throws {
        try withTemporaryDirectory { directory throws in
            // A plain file where the store's folder should be: the store cannot be opened.
            try Data("blocker".utf8).write(to: directory.appendingPathComponent("store"))
            let storage = openStore(directory)
            expectError(.unavailable) { try storage.value(for: .launches) }
            expectError(.unavailable) { try storage.update(.launches) { $0 += 1 } }
            #expect(storage[.launches] == 10)
        }
    }

    /// `values(for:)` with a typed key (issue 33, item 2): the key's type, absent read as the
    /// default (before the first store and after a removal), other instances' changes included;
    /// an optional key yields `nil` for absent.
    @Test func aTypedKeysValuesAreItsTypeWithTheDefaultForAbsent() async throws {
        try await withScratchDirectory { directory in
            let storage = openStore(directory)
            let other = openStore(directory)
            let streaks = storage.values(for: .streak)
            let users = storage.values(for: .lastUser)
            storage[.streak] = 3
            try other.storeOrThrow(4, forKey: "streak")
            other.remove(.streak)
            other[.lastUser] = "ada"
            #expect(await collect(streaks, count: 4) == [0, 3, 4, 0])
            #expect(await collect(users, count: 2) == [nil, "ada"])
        }
    }
}
