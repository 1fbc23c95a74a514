public import Foundation

extension TinyStorage {
    /// Copies the given keys from `userDefaults` into this store, in one atomic commit.
    ///
    /// The original library's migration, with the same rules: keys in `boolKeys` are stored as
    /// `Bool`, `[Bool]` or `[String: Bool]` (`UserDefaults` keeps booleans as numbers, which is
    /// why they are listed apart); keys absent from `userDefaults` are skipped; a `Data` value is
    /// stored as the same bytes (so `retrieve(type: Data.self, …)` returns them, and bytes that
    /// hold JSON decode as the type they encode); integers, doubles, strings, dates, and arrays
    /// and dictionaries of those are stored JSON-encoded like any value, so
    /// `retrieve(type: [String: Int].self, forKey:)` reads back what `UserDefaults` held; nested
    /// collections (an array of arrays, a dictionary of dictionaries…) are reported as unsupported
    /// and skipped. `userDefaults` is not changed.
    ///
    /// The key lists may be sets, as in the original library, or arrays:
    ///
    /// ```swift
    /// let boolKeys: Set<String> = ["onboarded"]
    /// storage.migrate(
    ///     userDefaults: .standard, nonBoolKeys: ["streak", "lastOpened"], boolKeys: boolKeys,
    ///     overwriteTinyStorageIfConflict: false)
    /// ```
    ///
    /// - Warning: An unavailable `UserDefaults` (its file encrypted before the first unlock, or
    ///   unreadable) looks empty, and this method then migrates nothing without complaint. Prefer
    ///   ``migrate(userDefaults:nonBoolKeys:boolKeys:requiring:overwriteTinyStorageIfConflict:writeID:)``,
    ///   which refuses in that case.
    /// - Parameters:
    ///   - userDefaults: The source.
    ///   - nonBoolKeys: Keys of non-`Bool` values.
    ///   - boolKeys: Keys of `Bool` values. A key listed in both lists is migrated as a `Bool`.
    ///   - overwriteTinyStorageIfConflict: When a key already holds a different value in this
    ///     store: `true` replaces it, `false` keeps it.
    ///   - writeID: Passed on in ``didChangeNotification``; at most ``maximumWriteIDLength`` bytes.
    /// - Returns: What happened to each key, or `nil` when nothing could be written (the error is
    ///   logged: the store is unavailable, the writeID is too long, or the disk refused the commit).
    @discardableResult
    public func migrate(
        userDefaults: UserDefaults, nonBoolKeys: some Sequence<String>, boolKeys: some Sequence<String>,
        overwriteTinyStorageIfConflict: Bool, writeID: String? = nil
    ) -> MigrationReport? {
        logging { () throws(TinyStorageError) in
            try migrateAll(
                from: userDefaults, nonBoolKeys: nonBoolKeys, boolKeys: boolKeys,
                overwrite: overwriteTinyStorageIfConflict, writeID: writeID)
        }
    }

    /// The older spelling of ``migrate(userDefaults:nonBoolKeys:boolKeys:overwriteTinyStorageIfConflict:writeID:)``,
    /// kept so code written for early versions of the original library compiles unchanged.
    ///
    /// ```swift
    /// storage.migrate(userDefaults: .standard, nonBoolKeys: ["streak"], boolKeys: [], overwriteIfConflict: true)
    /// ```
    ///
    /// - Parameters:
    ///   - userDefaults: The source; read, never changed.
    ///   - nonBoolKeys: Keys whose values are numbers, strings, dates, data, or arrays and
    ///     dictionaries of those.
    ///   - boolKeys: Keys whose values are stored as `Bool`.
    ///   - overwriteIfConflict: Whether a different value already in this store is replaced.
    /// - Returns: What happened to each key, or `nil` when nothing could be written (logged).
    @discardableResult
    public func migrate(
        userDefaults: UserDefaults, nonBoolKeys: some Sequence<String>, boolKeys: some Sequence<String>,
        overwriteIfConflict: Bool
    ) -> MigrationReport? {
        migrate(
            userDefaults: userDefaults, nonBoolKeys: nonBoolKeys, boolKeys: boolKeys,
            overwriteTinyStorageIfConflict: overwriteIfConflict)
    }

    /// Copies the given keys from `userDefaults` into this store in one atomic commit, but only
    /// when `sentinelKey` is present in `userDefaults`, and reports what happened to each key.
    ///
    /// An unavailable `UserDefaults` looks empty rather than failing. Name a key your app always
    /// writes (such as `"hasLaunchedBefore"`): when it is missing, the source is either unavailable
    /// or genuinely empty, and this method refuses, writing nothing, so a migration is never run
    /// against an empty-looking source and then marked as done. The sentinel is only checked; list
    /// it in `nonBoolKeys` or `boolKeys` to migrate it too.
    ///
    /// Either every migrated key is written or, after a crash, none is. Values are converted as in
    /// ``migrate(userDefaults:nonBoolKeys:boolKeys:overwriteTinyStorageIfConflict:writeID:)``.
    ///
    /// ```swift
    /// if !storage.contains("migratedFromUserDefaults") {
    ///     let report = try storage.migrate(
    ///         userDefaults: .standard, nonBoolKeys: ["streak"], boolKeys: ["onboarded"],
    ///         requiring: "hasLaunchedBefore")
    ///     storage.store(true, forKey: "migratedFromUserDefaults")
    ///     if !report.isComplete { log(report) }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - userDefaults: The source; read, never changed.
    ///   - nonBoolKeys: Keys of non-`Bool` values.
    ///   - boolKeys: Keys of `Bool` values.
    ///   - sentinelKey: A key that must hold a value in `userDefaults` for the migration to run.
    ///   - overwriteTinyStorageIfConflict: When a key already holds a different value in this
    ///     store: `true` replaces it, `false` (the default) keeps it and reports ``MigrationReport/Reason/conflictKept``.
    ///   - writeID: Passed on in ``didChangeNotification``; at most ``maximumWriteIDLength`` bytes.
    /// - Returns: Every requested key, migrated, skipped or failed, with the reason.
    /// - Throws: `.migrationRefused` when `sentinelKey` is absent from `userDefaults`;
    ///   `.invalidWriteID`; `.unavailable` or a file-system error (`.noSpace`, `.permissionDenied`,
    ///   `.io`) when the commit cannot be written. Nothing is written when it throws.
    public func migrate(
        userDefaults: UserDefaults, nonBoolKeys: some Sequence<String>, boolKeys: some Sequence<String>,
        requiring sentinelKey: String, overwriteTinyStorageIfConflict: Bool = false, writeID: String? = nil
    ) throws -> MigrationReport {
        guard userDefaults.object(forKey: sentinelKey) != nil else {
            throw TinyStorageError(
                .migrationRefused,
                "The sentinel key is missing from UserDefaults, which may be unavailable (before the first "
                    + "unlock, or its file unreadable) and only look empty. Nothing was migrated; try again "
                    + "later, or skip the migration on a fresh install.",
                key: sentinelKey)
        }
        return try migrateAll(
            from: userDefaults, nonBoolKeys: nonBoolKeys, boolKeys: boolKeys,
            overwrite: overwriteTinyStorageIfConflict, writeID: writeID)
    }

    // MARK: Internals

    /// Converts and encodes every requested key, then writes them all in one commit.
    func migrateAll(
        from userDefaults: UserDefaults, nonBoolKeys: some Sequence<String>, boolKeys: some Sequence<String>,
        overwrite: Bool, writeID: String?
    ) throws(TinyStorageError) -> MigrationReport {
        let writeID = try Self.validatedWriteID(writeID)
        var candidates: [(name: String, value: StoredValue)] = []
        var skipped: [String: MigrationReport.Reason] = [:]
        var failed: [String: MigrationReport.Reason] = [:]
        var notes: [String] = []
        var seen = Set<String>()
        let requests = boolKeys.map { ($0, true) } + nonBoolKeys.map { ($0, false) }
        for (key, isBool) in requests where seen.insert(key).inserted {
            do throws(TinyStorageError) {
                _ = try Self.validatedName(of: key)
            } catch {
                failed[key] = .invalidKey
                notes.append(error.description)
                continue
            }
            guard let object = userDefaults.object(forKey: key) else {
                skipped[key] = .absent
                continue
            }
            let converted = isBool ? UserDefaultsValue.boolValue(object) : UserDefaultsValue.from(object)
            switch converted {
            case .refused(let reason):
                failed[key] = reason
                notes.append("UserDefaults key '\(key)' was not migrated (\(reason)): it holds a \(type(of: object)).")
            case .converted(let value):
                do throws(TinyStorageError) {
                    candidates.append((key, try ValueCoding.encode(value.encodable, forKey: key)))
                } catch {
                    failed[key] = error.code == .valueTooLarge ? .valueTooLarge : .encodingFailed
                    notes.append(error.description)
                }
            }
        }
        let (migrated, conflicts) = try engine.commit { entries in
            var operations: [LogOperation] = []
            var migrated: [String] = []
            var conflicts: [String] = []
            for (name, value) in candidates {
                if let current = entries[name]?.stored, current != value, !overwrite {
                    conflicts.append(name)
                    continue
                }
                migrated.append(name)
                if entries[name]?.stored != value {
                    operations.append(LogOperation.setting(name, to: value))
                }
            }
            let commit = operations.isEmpty ? nil : LogCommit(writeID: writeID, operations: SmallList(operations))
            return Engine.Plan(commit: commit, result: (migrated, conflicts))
        }
        for name in conflicts { skipped[name] = .conflictKept }
        let report = MigrationReport(migrated: migrated, skipped: skipped, failed: failed)
        // NB: logged after the commit: the logger is never called while the store holds a lock.
        for note in notes { logger.log(.warning, note) }
        logger.log(.info, "Migration from UserDefaults: \(report)")
        return report
    }
}

// For the `tinystorage import-userdefaults` command, which reads property-list files too.
extension TinyStorage {
    /// How ``migrate(userDefaults:nonBoolKeys:boolKeys:requiring:overwriteTinyStorageIfConflict:writeID:)``
    /// would store one property-list object: its bytes (exactly what `store(_:forKey:)` writes:
    /// JSON, or a `Data`'s raw bytes) and a name for its type, or why it cannot.
    package static func migrationEncoding(of object: Any) -> MigrationEncoding {
        switch UserDefaultsValue.from(object) {
        case .refused(let reason):
            return .refused(reason)
        case .converted(let value):
            do throws(TinyStorageError) {
                return .encoded(try ValueCoding.encode(value.encodable, forKey: "value"), typeName: value.kind)
            } catch {
                return .refused(error.code == .valueTooLarge ? .valueTooLarge : .encodingFailed)
            }
        }
    }

    /// The outcome of ``migrationEncoding(of:)``.
    package enum MigrationEncoding {
        case encoded(StoredValue, typeName: String)
        case refused(MigrationReport.Reason)
    }

    /// Whether a property-list object holds a value (corelibs wraps some in `Optional<Any>`).
    package static func isPresentPropertyListValue(_ object: Any?) -> Bool {
        object.flatMap(UserDefaultsValue.unwrapped) != nil
    }
}
