import Foundation

extension TinyStorage.Key {
    /// Returns this key, also able to read a value an older version of the app stored as `Older`.
    ///
    /// When the stored bytes do not decode as `Value`, a read tries the older types in the order
    /// they were declared — declare the newest first — and the first that decodes is converted
    /// with its `upgrade` closure and returned. The read also writes the converted value back in
    /// the current shape, in one commit, and only if the key still holds the bytes it read: a
    /// value written meanwhile, by another thread or process (perhaps a newer version of the
    /// app), is never overwritten. Every later read then finds the current shape, and the write
    /// is announced like any other change and listed in ``TinyStorage/typeMigrationReports``.
    ///
    /// ```swift
    /// extension TinyStorage.Key where Value == Settings {
    ///     static var settings: Self {
    ///         .init("settings", default: Settings())
    ///             .migrating(from: SettingsV2.self) { Settings(upgrading: $0) }
    ///             .migrating(from: SettingsV1.self) { Settings(upgrading: SettingsV2(upgrading: $0)) }
    ///     }
    /// }
    ///
    /// let settings = storage[.settings]  // a Settings, whichever version stored it
    /// ```
    ///
    /// Every way of reading the key uses its older shapes: the subscript, ``TinyStorage/value(for:)``,
    /// `retrieve` and `retrieveOrThrow` given this key, ``TinyStorage/update(_:writeID:_:)``
    /// (which commits the upgraded value with `body`'s changes), `@TinyStorageItem`, value
    /// streams and `autoUpdatingRetrieve`. A key read with a plain string name, or as another
    /// type, reads only the current shape.
    ///
    /// Nothing is written back, and the read still answers the converted value, when the
    /// conversion gives `nil`, or when encoding the decoded `Older` value again does not give back
    /// everything the stored value holds: `Older` then ignored fields it does not know, so the
    /// bytes were probably written by a newer version of the app, and they are kept for it. A
    /// write-back that fails (the store became unavailable, the disk is full) is logged, and the
    /// next read upgrades again. When no type decodes, the bytes are left untouched: the throwing
    /// reads throw `.decodingFailed` naming every type tried and where each failed, the others
    /// log that and answer the default.
    ///
    /// The key's equality, hashing and stored name do not change: declaring older shapes changes
    /// no file format, and a read that finds the current shape decodes nothing more. Building
    /// the key is part of each use of a `static var` key: declaring one older shape adds no
    /// allocation to it; further ones are kept in an array, which does allocate.
    ///
    /// - Parameters:
    ///   - olderType: A type an older version of the app stored under this key: the previous
    ///     version of `Value`, kept under another name, or any other `Codable` type such as `Int`.
    ///     `Codable` so a read can tell whether it missed anything the stored value holds.
    ///   - upgrade: Converts an `Older` value to the current type. Keep it a pure conversion: it
    ///     may run on any thread, more than once for one stored value, while a value stream is
    ///     being set up, and must not use the store. What it throws is reported as
    ///     `.decodingFailed` (with the thrown error as ``TinyStorageError/underlying``), and
    ///     nothing is written.
    /// - Returns: A copy of this key that also reads `Older`, after the older types declared so far.
    @inlinable
    public consuming func migrating<Older: Codable & Sendable>(
        from olderType: Older.Type, _ upgrade: @escaping @Sendable (Older) throws -> Value
    ) -> Self {
        migrations.append(TypeMigration(from: olderType, upgrade: upgrade))
        return self
    }
}

/// One older shape a typed key reads, and how it becomes the key's current type.
///
/// NB: a key is built on every use (`static var settings: Self { … }`: generic types have no
/// stored statics), so this is small and built by code inlined where the key is declared: a
/// metatype and a closure, no existential box, no allocation; names are made only when a read
/// needs one.
@usableFromInline
struct TypeMigration<Value>: Sendable {
    /// What reading a stored value as the older type gave.
    enum Attempt {
        /// The bytes are not the older type: the decoding error.
        case notDecoded(TinyStorageError)
        /// The bytes decoded and were converted. `keptEverything`: encoding the older value again
        /// gives back everything the stored value holds, so the older type missed nothing.
        case upgraded(Value, keptEverything: Bool)
    }

    /// Thrown by `upgrade` when given something other than the older type (never: `attempt`
    /// decodes it as `olderType`).
    @usableFromInline
    struct NotTheOlderType: Error {
        @usableFromInline init() {}
    }

    /// NB: one word, where `any (Codable & Sendable).Type` takes three (see ``OlderShapes``). A
    /// read casts it back.
    @usableFromInline let olderType: Any.Type
    /// The declared conversion, taking the decoded older value.
    @usableFromInline let upgrade: @Sendable (any Sendable) throws -> Value

    @inlinable
    init<Older: Codable & Sendable>(from olderType: Older.Type, upgrade: @escaping @Sendable (Older) throws -> Value) {
        self.olderType = olderType
        self.upgrade = { older in
            guard let older = older as? Older else { throw NotTheOlderType() }
            return try upgrade(older)
        }
    }

    /// The older type's name, for errors, logs and reports.
    var olderTypeName: String { String(describing: olderType) }

    /// Decodes a stored value as the older type and converts it. Takes the key's name for errors.
    ///
    /// - Throws: `.decodingFailed` when the conversion throws.
    func attempt(_ stored: StoredValue, name: String) throws(TinyStorageError) -> Attempt {
        // NB: always succeeds: `init` takes only a `Codable & Sendable` type.
        guard let olderType = olderType as? any (Codable & Sendable).Type else {
            return .notDecoded(TinyStorageError(.decodingFailed, "\(olderType) is not Codable.", key: name))
        }
        return try attempt(stored, as: olderType, name: name)
    }

    private func attempt<Older: Codable & Sendable>(
        _ stored: StoredValue, as type: Older.Type, name: String
    ) throws(TinyStorageError) -> Attempt {
        let older: Older
        do throws(TinyStorageError) {
            older = try ValueCoding.decode(Older.self, from: stored, forKey: name)
        } catch {
            return .notDecoded(error)
        }
        let value: Value
        do {
            value = try upgrade(older)
        } catch {
            throw TinyStorageError(
                .decodingFailed,
                "The stored value decoded as \(olderTypeName), but its migration to \(Value.self) threw. "
                    + "It was left untouched.",
                key: name, underlying: error)
        }
        return .upgraded(value, keptEverything: JSONTree.encoding(older, keepsEverythingIn: stored, forKey: name))
    }
}

/// The older shapes a key reads, newest first.
///
/// NB: the first is kept inline, so building a key that declares one costs no allocation; the
/// others go to an array (one allocation per key built). Keeping a second inline makes `Key` too
/// large for the compiler to copy and destroy it inline, a cost every key without older shapes
/// would then pay on every use.
@usableFromInline
struct OlderShapes<Value>: Sendable {
    @usableFromInline var first: TypeMigration<Value>?
    @usableFromInline var others: [TypeMigration<Value>] = []

    @inlinable init() {}

    var isEmpty: Bool { first == nil }

    var all: [TypeMigration<Value>] { [first].compactMap { $0 } + others }

    @inlinable
    mutating func append(_ migration: TypeMigration<Value>) {
        if first == nil {
            first = migration
        } else {
            others.append(migration)
        }
    }
}

/// A key that may declare older shapes of its value: ``TinyStorage/Key``, seen through
/// `any TinyStorageKey` by the reads that take one.
protocol TypeMigratingKey {
    /// Reads `stored`, which did not decode as `T` (`failure`), through the older shapes the key
    /// declares for `T`; `nil` when it declares none.
    ///
    /// - Throws: `.decodingFailed` naming every type tried when none decodes, or when an upgrade
    ///   closure throws.
    func readOlderShape<T>(
        _ stored: StoredValue, as type: T.Type, name: String, failure: TinyStorageError
    ) throws(TinyStorageError) -> (value: T, upgrade: TypeUpgrade)?
}

extension TinyStorage.Key: TypeMigratingKey {
    func readOlderShape<T>(
        _ stored: StoredValue, as type: T.Type, name: String, failure: TinyStorageError
    ) throws(TinyStorageError) -> (value: T, upgrade: TypeUpgrade)? {
        guard !migrations.isEmpty, T.self == Value.self else { return nil }
        var failures = [DecodingFailure(typeName: String(describing: Value.self), error: failure)]
        for migration in migrations.all {
            switch try migration.attempt(stored, name: name) {
            case .notDecoded(let error):
                failures.append(DecodingFailure(typeName: migration.olderTypeName, error: error))
            case .upgraded(let value, let keptEverything):
                // NB: always succeeds: `T` is `Value`.
                guard let typed = value as? T else { return nil }
                let upgrade = TypeUpgrade(
                    olderTypeName: migration.olderTypeName, currentTypeName: String(describing: Value.self),
                    writeBack: TypeUpgrade.writeBack(of: value, keptEverything: keptEverything, forKey: name))
                return (typed, upgrade)
            }
        }
        throw DecodingFailure.error(forKey: name, stored: stored, failures: failures)
    }
}

/// A value read through an older shape: what it was, what it became, and what to write back.
struct TypeUpgrade: Sendable {
    /// Whether, and as what, an upgraded value is written back.
    enum WriteBack: Sendable {
        /// The value in the current shape.
        case write(StoredValue)
        /// Kept as it is stored, for this reason (a sentence fragment for the log).
        case skip(String)
    }

    var olderTypeName: String
    var currentTypeName: String
    var writeBack: WriteBack

    static func writeBack<Value: Encodable>(
        of value: Value, keptEverything: Bool, forKey name: String
    ) -> WriteBack {
        guard keptEverything else {
            return .skip(
                "the older type does not hold everything the stored value does, so it was probably "
                    + "written by a newer version of the app, and it is kept for that version")
        }
        guard !TinyStorage.isNil(value) else { return .skip("the upgrade gave nil, and a read never removes a value") }
        do throws(TinyStorageError) {
            return .write(try ValueCoding.encode(value, forKey: name))
        } catch {
            return .skip("the upgraded value could not be encoded: \(error)")
        }
    }
}
