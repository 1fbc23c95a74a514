public import Foundation

extension TinyStorage {
    /// A stored value this instance read in an older shape and wrote back in the current one.
    ///
    /// A typed key declares the older types it reads with ``Key/migrating(from:_:)``. When a read
    /// finds one of them, converts it and writes the result back, the upgrade is logged at info
    /// level and kept in ``typeMigrationReports``.
    ///
    /// ```swift
    /// for report in storage.typeMigrationReports {
    ///     print(report)  // Upgraded "settings" from SettingsV1 to Settings.
    /// }
    /// ```
    ///
    /// (Not to be confused with ``MigrationReport``, what a migration from `UserDefaults` did.)
    public struct TypeMigrationReport: Sendable, Equatable, CustomStringConvertible {
        /// When the upgraded value was written back.
        public let date: Date
        /// The key whose value was upgraded.
        public let key: String
        /// The older type the stored value was read as, such as `"SettingsV1"`.
        public let fromType: String
        /// The key's current type, which the value was written back as, such as `"Settings"`.
        public let toType: String

        /// One line naming the key and both types, never the value.
        ///
        /// ```swift
        /// print(report)  // Upgraded "settings" from SettingsV1 to Settings.
        /// ```
        public var description: String { "Upgraded \"\(key)\" from \(fromType) to \(toType)." }
    }

    /// The values this instance upgraded from an older shape and wrote back, oldest first (the
    /// most recent ``maximumTypeMigrationReports``).
    ///
    /// Empty until a read finds a value in an older shape that its key declares with
    /// ``Key/migrating(from:_:)``. An upgrade that was not written back (another process wrote
    /// the key first, or the write failed) is not listed: the next read upgrades it again.
    ///
    /// ```swift
    /// _ = storage[.settings]
    /// let upgraded = storage.typeMigrationReports.map(\.key)  // ["settings"] the first time
    /// ```
    public var typeMigrationReports: [TypeMigrationReport] {
        typeMigrations.withLock { $0 }
    }

    /// How many reports ``typeMigrationReports`` keeps; older ones are dropped.
    public static let maximumTypeMigrationReports = 256
}
