import Foundation
import Testing
import TinyStorage

// The examples of Documentation.docc/EvolvingStoredTypes.md, as written there, so the article
// cannot drift from the API or from what TinyStorage does.

// MARK: Change types so older values still decode

struct Preferences: Codable, Sendable, Equatable {
    enum Theme: String, Codable, Sendable {
        case light, dark, system
        case unknown  // a theme added by a newer release

        init(from decoder: any Decoder) throws {
            let name = try decoder.singleValueContainer().decode(String.self)
            self = Theme(rawValue: name) ?? .unknown
        }
    }

    var name: String
    var fontSize: Int
    var accentColor: String?  // added in release 2: nil in older values
    var theme: Theme  // added in release 3: .system in older values

    init(name: String, fontSize: Int = 14, accentColor: String? = nil, theme: Theme = .system) {
        self.name = name
        self.fontSize = fontSize
        self.accentColor = accentColor
        self.theme = theme
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        fontSize = try container.decodeIfPresent(Int.self, forKey: .fontSize) ?? 14
        accentColor = try container.decodeIfPresent(String.self, forKey: .accentColor)
        theme = try container.decodeIfPresent(Theme.self, forKey: .theme) ?? .system
    }
}

// MARK: Declare a migration when the shape changes

/// What release 1 stored under "settings".
struct SettingsV1: Codable, Sendable {
    var name: String
    var dark: Bool
}

/// What release 2 stored: the switch became a theme name.
struct SettingsV2: Codable, Sendable {
    var name: String
    var theme: String

    init(upgrading old: SettingsV1) {
        name = old.name
        theme = old.dark ? "dark" : "light"
    }
}

/// Release 3, the current type.
struct Settings: Codable, Sendable, Equatable {
    enum Theme: String, Codable, Sendable { case light, dark, system }

    var displayName = ""
    var theme = Theme.system

    init() {}

    init(upgrading old: SettingsV2) {
        displayName = old.name
        theme = Theme(rawValue: old.theme) ?? .system
    }
}

extension TinyStorage.Key where Value == Settings {
    static var settings: Self {
        .init("settings", default: Settings())
            .migrating(from: SettingsV2.self) { Settings(upgrading: $0) }
            .migrating(from: SettingsV1.self) { Settings(upgrading: SettingsV2(upgrading: $0)) }
    }
}

struct Account: Codable, Sendable, Equatable {
    var userName: String
    var isVerified = false
}

extension TinyStorage.Key where Value == Account? {
    // Release 1 stored the user name alone, as a string.
    static var account: Self {
        .init("account").migrating(from: String.self) { Account(userName: $0) }
    }
}

// MARK: When an older version reads a newer value

func applyTheme(from storage: TinyStorage) -> Settings.Theme {
    do {
        return try storage.value(for: .settings).theme
    } catch TinyStorageError.Code.decodingFailed {
        // A newer release wrote it: show the default, and do not store over it.
        return .system
    } catch {
        return .system  // unavailable: unknown for now
    }
}

@Suite struct EvolvingStoredTypesExampleTests {
    /// Release 1 of `Preferences`, which stored only these two.
    struct PreferencesV1: Codable {
        var name: String
        var fontSize: Int
    }

    @Test func olderAndNewerValuesDecodeWithoutAMigration() throws {
        let storage = TinyStorage.inMemory()
        try storage.storeOrThrow(PreferencesV1(name: "Ada", fontSize: 12), forKey: "preferences")
        #expect(
            try storage.retrieveOrThrow(type: Preferences.self, forKey: "preferences")
                == Preferences(name: "Ada", fontSize: 12))

        let newer = #"{"accentColor":"teal","fontSize":16,"name":"Ada","theme":"sepia","wallpaper":3}"#
        let decoded = try JSONDecoder().decode(Preferences.self, from: Data(newer.utf8))
        #expect(decoded == Preferences(name: "Ada", fontSize: 16, accentColor: "teal", theme: .unknown))
    }

    @Test func aReadUpgradesReleaseOnesSettingsAndWritesThemBack() throws {
        let storage = TinyStorage.inMemory()
        try storage.storeOrThrow(SettingsV1(name: "Ada", dark: true), forKey: "settings")
        var expected = Settings()
        expected.displayName = "Ada"
        expected.theme = .dark

        #expect(storage[.settings] == expected)
        #expect(
            try storage.retrieveOrThrow(type: Settings.self, forKey: TinyStorage.Key<Settings>.settings) == expected)
        #expect(
            storage.typeMigrationReports.map(\.description) == [#"Upgraded "settings" from SettingsV1 to Settings."#])
        // Written back as Settings: a plain read of the current type finds it now.
        #expect(try storage.retrieveOrThrow(type: Settings.self, forKey: "settings") == expected)
        for report in storage.typeMigrationReports {
            print(report)  // Upgraded "settings" from SettingsV1 to Settings.
        }

        storage.store("ada", forKey: "account")
        #expect(storage[.account] == Account(userName: "ada"))
        #expect(storage.typeMigrationReports.last?.fromType == "String")
    }

    @Test func anOlderReleaseLeavesANewerValueAlone() throws {
        let storage = TinyStorage.inMemory()
        #expect(applyTheme(from: storage) == .system)
        storage.store(["displayName": "Ada", "theme": "sepia"], forKey: "settings")  // from a newer release
        #expect(applyTheme(from: storage) == .system)
        #expect(storage.retrieve(type: [String: String].self, forKey: "settings")?["theme"] == "sepia")
        #expect(storage.typeMigrationReports.isEmpty)
    }
}
