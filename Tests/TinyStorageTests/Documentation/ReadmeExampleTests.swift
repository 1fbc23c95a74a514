import Foundation
import Testing
import TinyStorage

// The README's example, run: what it prints and stores (with a temporary directory). Its text is
// compiled as printed by DocumentationSnippetTests (Tests/CLITests).

extension TinyStorage.Key where Value == Int {
    fileprivate static var readmeStreak: Self { .init("streak", default: 0) }
}

private enum Login: String, TinyStorageKeyGroup { case userName, lastSignIn }

// The README's evolving type: version 1 stored a name, version 2 a name and a theme, version 3
// (current) adds a font size.
private struct ReadmeSettingsV1: Codable, Sendable { var name: String }
private struct ReadmeSettingsV2: Codable, Sendable {
    var name: String
    var theme: String
    init(upgrading old: ReadmeSettingsV1) { (name, theme) = (old.name, "system") }
}
private struct ReadmeSettings: Codable, Sendable, Equatable {
    var name = ""
    var theme = "system"
    var fontSize = 17
    init() {}
    init(upgrading old: ReadmeSettingsV2) { (name, theme) = (old.name, old.theme) }
}

extension TinyStorage.Key where Value == ReadmeSettings {
    fileprivate static var settings: Self {
        .init("settings", default: ReadmeSettings())
            .migrating(from: ReadmeSettingsV2.self) { ReadmeSettings(upgrading: $0) }
            .migrating(from: ReadmeSettingsV1.self) { ReadmeSettings(upgrading: ReadmeSettingsV2(upgrading: $0)) }
    }
}

@Suite struct ReadmeExampleTests {
    @Test func theReadmeMigratingKeyReadsAVersion1Value() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("readme-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = TinyStorage(insideDirectory: directory, name: "settings")
        try storage.storeOrThrow(ReadmeSettingsV1(name: "Ada"), forKey: "settings")
        var expected = ReadmeSettings()
        expected.name = "Ada"
        #expect(storage[.settings] == expected)
        #expect(storage.typeMigrationReports.map(\.key) == ["settings"])
    }

    @Test func theReadmeExampleRunsAsWritten() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("readme-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = TinyStorage(insideDirectory: directory, name: "settings")

        storage[.readmeStreak] = 364
        let streak = try storage.value(for: .readmeStreak)
        #expect(streak == 364)
        try storage.update(.readmeStreak) { $0 += 1 }
        storage.group(Login.self).store("ada", forKey: .userName)
        #expect(storage.retrieve(type: String.self, forKey: "Login.userName") == "ada")
        #expect(storage.incrementInteger(forKey: "launches") == 1)
        for await value in storage.values(forKey: "streak", as: Int.self) {
            #expect(value == 365)
            break
        }
        #expect(TinyStorage(insideDirectory: directory, name: "settings")[.readmeStreak] == 365)
    }

    @Test func applicationSupportDirectoryExists() {
        // The README opens its store there; it must resolve on every platform we test.
        let support = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)
        #expect(!support.isEmpty)
    }
}
