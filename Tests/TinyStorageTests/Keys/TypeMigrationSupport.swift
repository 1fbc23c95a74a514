import Foundation
import Testing

@testable import TinyStorage

// Three versions of an app's settings, as three app releases stored them (issue 13). No version
// decodes another's bytes, so every read of an older value has to go through the key's chain.

/// Release 1: a name and a dark-mode switch.
struct SettingsV1: Codable, Sendable, Equatable {
    var name: String
    var dark: Bool
}

/// Release 2: the switch became a theme name.
struct SettingsV2: Codable, Sendable, Equatable {
    var name: String
    var theme: String

    init(name: String, theme: String) {
        self.name = name
        self.theme = theme
    }

    init(upgrading old: SettingsV1) { self.init(name: old.name, theme: old.dark ? "dark" : "light") }
}

/// Release 3, the current one: a display name, a theme enum and a font size.
struct SettingsV3: Codable, Sendable, Equatable {
    enum Theme: String, Codable, Sendable { case light, dark, system }

    var displayName: String
    var theme: Theme
    var fontSize: Int

    init(displayName: String = "", theme: Theme = .system, fontSize: Int = 14) {
        self.displayName = displayName
        self.theme = theme
        self.fontSize = fontSize
    }

    init(upgrading old: SettingsV2) {
        self.init(displayName: old.name, theme: Theme(rawValue: old.theme) ?? .system)
    }
}

/// Counts the runs of each step of a key's migration chain, and can make a step throw.
final class MigrationCalls: Sendable {
    struct Refused: Error, Equatable {}

    let fromV2 = Locked(0)
    let fromV1 = Locked(0)
    /// When set, the step from version 1 throws ``Refused``.
    let refuseV1 = Locked(false)
    /// Runs inside the step from version 1, before it converts (a seam to race a writer against).
    let duringV1 = Locked<(@Sendable () -> Void)?>(nil)

    var stepsRun: (fromV2: Int, fromV1: Int) { (fromV2.withLock { $0 }, fromV1.withLock { $0 }) }

    /// The current release's key: version 3, reading version 2, then version 1, newest first.
    func settingsKey() -> TinyStorage.Key<SettingsV3> {
        .init("settings", default: SettingsV3())
            .migrating(from: SettingsV2.self) { [self] in
                fromV2.withLock { $0 += 1 }
                return SettingsV3(upgrading: $0)
            }
            .migrating(from: SettingsV1.self) { [self] in
                fromV1.withLock { $0 += 1 }
                duringV1.withLock { $0 }?()
                if refuseV1.withLock({ $0 }) { throw Refused() }
                return SettingsV3(upgrading: SettingsV2(upgrading: $0))
            }
    }
}

extension TinyStorage.Key where Value == SettingsV3 {
    /// The current release's key, with its two-step chain.
    static var settingsV3: Self { MigrationCalls().settingsKey() }
}

extension TinyStorage.Key where Value == SettingsV2 {
    /// Release 2's key, as an app (or widget) not yet updated declares it.
    static var settingsV2: Self {
        .init("settings", default: SettingsV2(name: "", theme: "light"))
            .migrating(from: SettingsV1.self) { SettingsV2(upgrading: $0) }
    }
}

/// The JSON TinyStorage stores for `value` (sorted keys, as `JSONEncoder` writes them).
func storedJSON(_ value: some Encodable) throws -> Data {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return try encoder.encode(value)
}

/// The records of the data file at `url`: every byte after its header, whose durable mark a
/// background flush may move at any time. The same before and after reads that write nothing.
func storedRecords(_ url: URL) throws -> Data {
    try Data(contentsOf: url).prefix(committedLength(url)).dropFirst(LogFormat.headerSize)
}
