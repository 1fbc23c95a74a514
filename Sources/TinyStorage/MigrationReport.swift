extension TinyStorage {
    /// What a migration from `UserDefaults` did with each key it was given.
    ///
    /// Every requested key appears in exactly one of ``migrated``, ``skipped`` and ``failed``.
    ///
    /// ```swift
    /// let report = try storage.migrate(
    ///     userDefaults: .standard, nonBoolKeys: ["streak"], boolKeys: ["onboarded"],
    ///     requiring: "hasLaunchedBefore")
    /// for (key, reason) in report.failed { print("not migrated: \(key) (\(reason))") }
    /// ```
    public struct MigrationReport: Sendable, Equatable, CustomStringConvertible {
        /// Why a key was skipped or failed, as an extensible set of reasons (new ones may be added,
        /// so `switch` statements over reasons need a `default`).
        public struct Reason: Hashable, Sendable, CustomStringConvertible {
            /// The reason's stable name, such as `"absent"`.
            public let rawValue: String

            /// Creates a reason from its stable name.
            ///
            /// ```swift
            /// let reason = TinyStorage.MigrationReport.Reason("absent")  // == .absent
            /// ```
            public init(_ rawValue: String) { self.rawValue = rawValue }

            /// The stable name, such as `"conflictKept"`.
            ///
            /// ```swift
            /// "\(TinyStorage.MigrationReport.Reason.absent)"  // "absent"
            /// ```
            public var description: String { rawValue }

            /// Skipped: `UserDefaults` has no value for the key.
            public static let absent = Reason("absent")
            /// Skipped: the store already held a different value and overwriting was not asked
            /// for, so the store's value was kept.
            public static let conflictKept = Reason("conflictKept")
            /// Failed: an array or dictionary holds another array or dictionary.
            public static let nestedCollection = Reason("nestedCollection")
            /// Failed: the value (or an element of it) is not an integer, double, string, date,
            /// data, `Bool`, or an array or dictionary of those.
            public static let unsupportedType = Reason("unsupportedType")
            /// Failed: a key listed in `boolKeys` holds something other than a number, or an
            /// array or dictionary of numbers.
            public static let notABool = Reason("notABool")
            /// Failed: the key breaks the rules of ``TinyStorageKey`` (empty, NUL, too long).
            public static let invalidKey = Reason("invalidKey")
            /// Failed: the value could not be encoded as JSON (a non-finite number).
            public static let encodingFailed = Reason("encodingFailed")
            /// Failed: the encoded value is larger than ``TinyStorage/maximumValueSize``.
            public static let valueTooLarge = Reason("valueTooLarge")
        }

        /// Keys whose `UserDefaults` value the store now holds: written by this migration, or
        /// already stored with exactly the same value. In the order they were given, bool keys first.
        ///
        /// ```swift
        /// for key in report.migrated { UserDefaults.standard.removeObject(forKey: key) }
        /// ```
        public let migrated: [String]
        /// Keys deliberately left alone, and why (``Reason/absent``, ``Reason/conflictKept``).
        ///
        /// ```swift
        /// if report.skipped["streak"] == .conflictKept { /* the store already had a streak */ }
        /// ```
        public let skipped: [String: Reason]
        /// Keys that could not be migrated, and why (``Reason/unsupportedType``,
        /// ``Reason/nestedCollection``, ``Reason/notABool``, ``Reason/invalidKey`` …).
        ///
        /// ```swift
        /// let nested = report.failed.filter { $0.value == .nestedCollection }.keys
        /// ```
        public let failed: [String: Reason]

        /// Creates a report.
        ///
        /// ```swift
        /// let empty = TinyStorage.MigrationReport(migrated: [], skipped: [:], failed: [:])
        /// ```
        public init(migrated: [String], skipped: [String: Reason], failed: [String: Reason]) {
            self.migrated = migrated
            self.skipped = skipped
            self.failed = failed
        }

        /// Whether no key failed (skipped keys do not count as failures).
        ///
        /// ```swift
        /// if !report.isComplete { logger.warning("\(report)") }
        /// ```
        public var isComplete: Bool { failed.isEmpty }

        /// A one-line summary naming keys and reasons, never values.
        ///
        /// ```swift
        /// print(report)  // migrated 2 [streak, name]; skipped 1 [theme (absent)]; failed 0 []
        /// ```
        public var description: String {
            func list(_ reasons: [String: Reason]) -> String {
                reasons.sorted { $0.key < $1.key }.map { "\($0.key) (\($0.value))" }.joined(separator: ", ")
            }
            return "migrated \(migrated.count) [\(migrated.joined(separator: ", "))]; "
                + "skipped \(skipped.count) [\(list(skipped))]; failed \(failed.count) [\(list(failed))]"
        }
    }
}
