import Foundation
import Testing

@testable import TinyStorage

/// Issue 13: an app version not updated yet (a widget, say) meets a value a newer version
/// wrote. What happens is documented in Documentation.docc/EvolvingStoredTypes.md ("When an older
/// version reads a newer value"): the older reader answers its default or throws, and never
/// writes the value back; only its own explicit write replaces it.
@Suite struct OlderReaderTests {
    static let ada = SettingsV3(displayName: "Ada", theme: .dark)

    @Test func anOlderVersionAnswersItsDefaultOrThrowsAndNeverWritesTheNewerValue() throws {
        try withTemporaryDirectory { directory throws in
            let app = openStore(directory)
            let widget = openStore(directory)
            try app.storeOrThrow(Self.ada, forKey: "settings")
            let records = try storedRecords(app.fileURL)

            #expect(widget[.settingsV2] == TinyStorage.Key<SettingsV2>.settingsV2.defaultValue)
            let error = expectError(.decodingFailed) { try widget.value(for: .settingsV2) }
            #expect(error?.message.contains("as SettingsV2 (settings.name: missing)") == true)
            #expect(error?.message.contains("SettingsV1 (settings.name: missing)") == true)
            expectError(.decodingFailed) { try widget.update(.settingsV2) { _ in Issue.record("body ran") } }

            #expect(try storedRecords(app.fileURL) == records)
            #expect(widget.typeMigrationReports.isEmpty)
            #expect(try app.value(for: .settingsV3) == Self.ada)

            // The older version's own write replaces the value; the newer one upgrades it again.
            try widget.storeOrThrow(SettingsV2(name: "Ada", theme: "light"), forKey: "settings")
            #expect(try app.value(for: .settingsV3) == SettingsV3(displayName: "Ada", theme: .light))
        }
    }

    @Test func anOlderTypeThatIgnoresFieldsOfANewerValueReadsItButNeverWritesItBack() throws {
        try withTemporaryDirectory { directory throws in
            let logger = TestLogger()
            let widget = openStore(directory, logger: logger)
            // A newer release added a field to version 1's shape; version 1 decodes it, ignoring it.
            let newer = Data(#"{"accent":"blue","dark":true,"name":"Ada"}"#.utf8)
            try widget.storeRawJSON(["settings": newer])
            let records = try storedRecords(widget.fileURL)

            #expect(widget[.settingsV2] == SettingsV2(name: "Ada", theme: "dark"))
            #expect(try widget.value(for: .settingsV2) == SettingsV2(name: "Ada", theme: "dark"))

            #expect(try storedRecords(widget.fileURL) == records)
            #expect(widget.typeMigrationReports.isEmpty)
            #expect(
                logger.texts(atLeast: .notice).contains {
                    $0.contains("not written back: the older type does not hold everything the stored value does")
                })
        }
    }
}
