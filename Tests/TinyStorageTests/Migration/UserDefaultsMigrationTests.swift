import Foundation
import Testing

@testable import TinyStorage

private struct Account: Codable, Equatable {
    var name: String
    var age: Int
}

/// Migration from real `UserDefaults` suites, with the original library's semantics.
@Suite struct UserDefaultsMigrationTests {
    // NB: whole seconds, because an XML property list keeps dates to the second.
    static let date = Date(timeIntervalSince1970: 1_700_000_000)
    static let otherDate = Date(timeIntervalSince1970: 1_600_000_000)

    @Test func migratesEverySupportedType() throws {
        try withUserDefaultsSuite { suite throws in
            let defaults = try fillUserDefaults(
                suite,
                [
                    "int": 365, "negative": -4, "double": 3.25, "string": "hello", "date": Self.date,
                    "data": Data([0, 1, 2, 255]), "ints": [1, 2, 3], "doubles": [1.5, 2.5], "strings": ["a", "b"],
                    "dates": [Self.date, Self.otherDate], "datas": [Data([1]), Data([2, 3])], "empty": [Int](),
                    "intsByName": ["a": 1, "b": 2], "doublesByName": ["pi": 3.5], "stringsByName": ["x": "y"],
                    "datesByName": ["start": Self.date], "dataByName": ["blob": Data([9])],
                    "account": ["name": "ada", "age": 36] as [String: Any],
                    "onboarded": true, "muted": false, "numericFlag": 1,
                ])
            let nonBoolKeys = [
                "int", "negative", "double", "string", "date", "data", "ints", "doubles", "strings", "dates", "datas",
                "empty", "intsByName", "doublesByName", "stringsByName", "datesByName", "dataByName", "account",
            ]
            try withTemporaryDirectory { directory throws in
                let storage = openStore(directory)
                let report = try #require(
                    storage.migrate(
                        userDefaults: defaults, nonBoolKeys: nonBoolKeys,
                        boolKeys: ["onboarded", "muted", "numericFlag"],
                        overwriteTinyStorageIfConflict: false))
                #expect(report.migrated == ["onboarded", "muted", "numericFlag"] + nonBoolKeys)
                #expect(report.skipped.isEmpty)
                #expect(report.failed.isEmpty)
                #expect(report.isComplete)

                let reopened = openStore(directory)
                #expect(reopened.retrieve(type: Int.self, forKey: "int") == 365)
                #expect(reopened.retrieve(type: Int.self, forKey: "negative") == -4)
                #expect(reopened.retrieve(type: Double.self, forKey: "double") == 3.25)
                #expect(reopened.retrieve(type: String.self, forKey: "string") == "hello")
                #expect(reopened.retrieve(type: Date.self, forKey: "date") == Self.date)
                #expect(reopened.retrieve(type: Data.self, forKey: "data") == Data([0, 1, 2, 255]))
                #expect(reopened.retrieve(type: [Int].self, forKey: "ints") == [1, 2, 3])
                #expect(reopened.retrieve(type: [Double].self, forKey: "doubles") == [1.5, 2.5])
                #expect(reopened.retrieve(type: [String].self, forKey: "strings") == ["a", "b"])
                #expect(reopened.retrieve(type: [Date].self, forKey: "dates") == [Self.date, Self.otherDate])
                #expect(reopened.retrieve(type: [Data].self, forKey: "datas") == [Data([1]), Data([2, 3])])
                #expect(reopened.retrieve(type: [Int].self, forKey: "empty") == [])
                #expect(reopened.retrieve(type: [String: Int].self, forKey: "intsByName") == ["a": 1, "b": 2])
                #expect(reopened.retrieve(type: [String: Double].self, forKey: "doublesByName") == ["pi": 3.5])
                #expect(reopened.retrieve(type: [String: String].self, forKey: "stringsByName") == ["x": "y"])
                #expect(reopened.retrieve(type: [String: Date].self, forKey: "datesByName") == ["start": Self.date])
                #expect(reopened.retrieve(type: [String: Data].self, forKey: "dataByName") == ["blob": Data([9])])
                #expect(
                    try reopened.retrieveOrThrow(type: Account.self, forKey: "account") == Account(name: "ada", age: 36)
                )
                #expect(reopened.retrieve(type: Bool.self, forKey: "onboarded") == true)
                #expect(reopened.retrieve(type: Bool.self, forKey: "muted") == false)
                #expect(reopened.retrieve(type: Bool.self, forKey: "numericFlag") == true)
                // Stored exactly as `store` would have stored them.
                #expect(try reopened.rawJSON(forKey: "int") == ValueCoding.encode(365, forKey: "int").bytes)
                #expect(try reopened.rawJSON(forKey: "onboarded") == Data("true".utf8))
                #expect(try reopened.rawJSON(forKey: "muted") == Data("false".utf8))
            }
        }
    }

    @Test func booleansListedAsNonBoolKeysStayBooleans() throws {
        try withUserDefaultsSuite { suite throws in
            let defaults = try fillUserDefaults(suite, ["flag": true, "flags": [true, false], "one": 1])
            try withTemporaryDirectory { directory throws in
                let storage = openStore(directory)
                storage.migrate(
                    userDefaults: defaults, nonBoolKeys: ["flag", "flags", "one"], boolKeys: [],
                    overwriteTinyStorageIfConflict: false)
                #expect(try storage.rawJSON(forKey: "flag") == Data("true".utf8))
                #expect(storage.retrieve(type: [Bool].self, forKey: "flags") == [true, false])
                // A plist integer is not a Bool, even when it is 1.
                #expect(try storage.rawJSON(forKey: "one") == Data("1".utf8))
            }
        }
    }

    @Test func aBoolKeyThatHoldsTextFailsAsNotABool() throws {
        try withUserDefaultsSuite { suite throws in
            let defaults = try fillUserDefaults(suite, ["flag": "yes please"])
            try withTemporaryDirectory { directory throws in
                let storage = openStore(directory)
                let report = try #require(
                    storage.migrate(
                        userDefaults: defaults, nonBoolKeys: [], boolKeys: ["flag"],
                        overwriteTinyStorageIfConflict: true))
                #expect(report.failed == ["flag": .notABool])
                #expect(!storage.contains("flag"))
            }
        }
    }

    @Test func absentKeysAreSkipped() throws {
        try withUserDefaultsSuite { suite throws in
            let defaults = try fillUserDefaults(suite, ["present": 1])
            try withTemporaryDirectory { directory throws in
                let storage = openStore(directory)
                let report = try #require(
                    storage.migrate(
                        userDefaults: defaults, nonBoolKeys: ["present", "missing"], boolKeys: ["missingFlag"],
                        overwriteTinyStorageIfConflict: false))
                #expect(report.migrated == ["present"])
                #expect(report.skipped == ["missing": .absent, "missingFlag": .absent])
                #expect(!storage.contains("missing"))
                // Absent bools are not invented as `false`.
                #expect(!storage.contains("missingFlag"))
            }
        }
    }

    @Test func nestedCollectionsAreReportedAndSkipped() throws {
        try withUserDefaultsSuite { suite throws in
            let defaults = try fillUserDefaults(
                suite,
                [
                    "arrayOfArrays": [[1], [2]], "arrayOfDictionaries": [["a": 1]], "dictionaryOfArrays": ["a": [1]],
                    "dictionaryOfDictionaries": ["a": ["b": 1]], "fine": [1, 2],
                ])
            let nested = ["arrayOfArrays", "arrayOfDictionaries", "dictionaryOfArrays", "dictionaryOfDictionaries"]
            try withTemporaryDirectory { directory throws in
                let logger = TestLogger()
                let storage = openStore(directory, logger: logger)
                let report = try #require(
                    storage.migrate(
                        userDefaults: defaults, nonBoolKeys: nested + ["fine"], boolKeys: [],
                        overwriteTinyStorageIfConflict: false))
                #expect(report.migrated == ["fine"])
                #expect(report.failed == Dictionary(uniqueKeysWithValues: nested.map { ($0, .nestedCollection) }))
                #expect(!report.isComplete)
                #expect(try storage.rawJSON().keys.sorted() == ["fine"])
                for key in nested {
                    #expect(logger.texts(atLeast: .warning).contains { $0.contains("'\(key)'") })
                }
            }
        }
    }

    @Test func conflictsKeepTheStoredValueUnlessOverwriting() throws {
        try withUserDefaultsSuite { suite throws in
            let defaults = try fillUserDefaults(suite, ["streak": 365, "name": "ada", "fresh": 1])
            try withTemporaryDirectory { directory throws in
                let storage = openStore(directory)
                storage.store(12, forKey: "streak")
                storage.store("ada", forKey: "name")
                let kept = try #require(
                    storage.migrate(
                        userDefaults: defaults, nonBoolKeys: ["streak", "name", "fresh"], boolKeys: [],
                        overwriteTinyStorageIfConflict: false))
                #expect(kept.skipped == ["streak": .conflictKept])
                // Already holding the very same value counts as migrated.
                #expect(kept.migrated == ["name", "fresh"])
                #expect(storage.retrieve(type: Int.self, forKey: "streak") == 12)

                let replaced = try #require(
                    storage.migrate(
                        userDefaults: defaults, nonBoolKeys: ["streak", "name", "fresh"], boolKeys: [],
                        overwriteTinyStorageIfConflict: true))
                #expect(replaced.migrated == ["streak", "name", "fresh"])
                #expect(replaced.skipped.isEmpty)
                #expect(openStore(directory).retrieve(type: Int.self, forKey: "streak") == 365)
            }
        }
    }

    @Test func theOlderSpellingMigratesToo() throws {
        try withUserDefaultsSuite { suite throws in
            let defaults = try fillUserDefaults(suite, ["streak": 365, "onboarded": true])
            try withTemporaryDirectory { directory throws in
                let storage = openStore(directory)
                storage.store(1, forKey: "streak")
                storage.migrate(
                    userDefaults: defaults, nonBoolKeys: ["streak"], boolKeys: ["onboarded"], overwriteIfConflict: true)
                #expect(storage.retrieve(type: Int.self, forKey: "streak") == 365)
                #expect(storage.bool(forKey: "onboarded"))
                storage.store(2, forKey: "streak")
                storage.migrate(
                    userDefaults: defaults, nonBoolKeys: ["streak"], boolKeys: [], overwriteIfConflict: false)
                #expect(storage.retrieve(type: Int.self, forKey: "streak") == 2)
            }
        }
    }

    @Test func aKeyListedTwiceIsMigratedOnceAsABool() throws {
        try withUserDefaultsSuite { suite throws in
            let defaults = try fillUserDefaults(suite, ["flag": 1])
            try withTemporaryDirectory { directory throws in
                let storage = openStore(directory)
                let report = try #require(
                    storage.migrate(
                        userDefaults: defaults, nonBoolKeys: ["flag", "flag"], boolKeys: ["flag"],
                        overwriteTinyStorageIfConflict: false))
                #expect(report.migrated == ["flag"])
                #expect(try storage.rawJSON(forKey: "flag") == Data("true".utf8))
            }
        }
    }

    @Test func unsupportedAndUnencodableValuesFail() throws {
        try withUserDefaultsSuite { suite throws in
            // Not flushed to disk: a NaN stays in the suite's memory, as an app could hold it.
            let defaults = try #require(UserDefaults(suiteName: suite))
            defaults.set(Double.nan, forKey: "nan")
            defaults.set(5, forKey: "")
            try withTemporaryDirectory { directory throws in
                let storage = openStore(directory)
                let report = try #require(
                    storage.migrate(
                        userDefaults: defaults, nonBoolKeys: ["nan", ""], boolKeys: [],
                        overwriteTinyStorageIfConflict: false))
                #expect(report.failed == ["nan": .encodingFailed, "": .invalidKey])
                #expect(try storage.rawJSON().isEmpty)
            }
        }
        // Values no property list holds (a UUID, a custom type) are refused by the converter.
        guard case .refused(.unsupportedType) = UserDefaultsValue.from(UUID()) else {
            Issue.record("a UUID is not a property-list value")
            return
        }
        guard case .refused(.unsupportedType) = UserDefaultsValue.from([UUID()]) else {
            Issue.record("an array of UUIDs is not a property-list value")
            return
        }
    }

    @Test func anUnavailableStoreMigratesNothingAndSaysSo() throws {
        try withUserDefaultsSuite { suite throws in
            let defaults = try fillUserDefaults(suite, ["streak": 365, "hasLaunched": true])
            try withTemporaryDirectory { directory throws in
                try Data("blocker".utf8).write(to: directory.appendingPathComponent("store"))
                let storage = openStore(directory)
                #expect(
                    storage.migrate(
                        userDefaults: defaults, nonBoolKeys: ["streak"], boolKeys: [],
                        overwriteTinyStorageIfConflict: true)
                        == nil)
                expectError(.unavailable) {
                    try storage.migrate(
                        userDefaults: defaults, nonBoolKeys: ["streak"], boolKeys: [], requiring: "hasLaunched")
                }
            }
        }
    }
}
