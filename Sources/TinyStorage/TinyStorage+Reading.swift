import Foundation

extension TinyStorage {
    /// The value stored for `key`, or `nil` when the key is absent.
    ///
    /// Also `nil`, after logging an error, when the store is unavailable or the stored bytes do not
    /// decode as `T`; use ``retrieveOrThrow(type:forKey:)-1m0vx`` to tell these apart. Decoded
    /// values of `Sendable` value types are cached, so repeated reads cost a hash table lookup.
    ///
    /// ```swift
    /// let streak = storage.retrieve(type: Int.self, forKey: "streak") ?? 0
    /// ```
    @inlinable
    public func retrieve<T: Decodable & Sendable>(type: T.Type, forKey key: any TinyStorageKey) -> T? {
        _retrieve(type, forKey: key)
    }

    /// `retrieve(type:forKey:)` with the key's type opened.
    ///
    /// NB: opening the existential here, in code inlined into the caller, lets the compiler see
    /// the caller's concrete key type (usually `String`): a cached read then builds no existential
    /// and does not destroy one through its value witness; only the full read, which needs
    /// `any TinyStorageKey`, wraps the key again. Cached `Int` reads measured about 6% faster.
    @inlinable
    func _retrieve<T: Decodable & Sendable, K: TinyStorageKey>(_ type: T.Type, forKey key: K) -> T? {
        if T.self == Int.self {
            if let cached = _cachedInt(forKey: key.rawValue) { return unsafeBitCast(cached, to: T.self) }
        } else if let cached = _cachedValue(forKey: key.rawValue, type: ObjectIdentifier(T.self)) {
            // NB: the box was created as `_DecodedValue<T>` for exactly this type identifier.
            return unsafeDowncast(cached, to: _DecodedValue<T>.self).value
        }
        do {
            return try readCaching(type, forKey: key)
        } catch {
            report(error)
            return nil
        }
    }

    /// The value stored for `key`, or `nil` when the key is absent. Values of non-`Sendable` types
    /// are decoded on every read.
    public func retrieve<T: Decodable>(type: T.Type, forKey key: any TinyStorageKey) -> T? {
        do {
            return try read(type, forKey: key, version: nil)
        } catch {
            report(error)
            return nil
        }
    }

    /// The value stored for `key`, or `nil` when the key is absent from a store that was read.
    ///
    /// - Throws: `.unavailable` when the store cannot be read (never `nil` in that case),
    ///   `.decodingFailed` when the stored bytes are not a `T` (they are kept), `.invalidKey`;
    ///   `.corrupted`, once, when this process repaired the file, found that data known to be on
    ///   stable storage was lost (see ``RecoveryReport/isDataLoss``), and the damaged bytes held
    ///   `key` (or named no key at all): `key`'s value may be older than it should be, or missing.
    ///   The next call answers from what was kept. Keys the damage did not hold read as usual.
    @inlinable
    public func retrieveOrThrow<T: Decodable & Sendable>(type: T.Type, forKey key: any TinyStorageKey) throws -> T? {
        try _retrieveOrThrow(type, forKey: key)
    }

    /// `retrieveOrThrow(type:forKey:)` with the key's type opened, as `_retrieve(_:forKey:)` is.
    @inlinable
    func _retrieveOrThrow<T: Decodable & Sendable, K: TinyStorageKey>(_ type: T.Type, forKey key: K) throws -> T? {
        if T.self == Int.self {
            if let cached = _cachedInt(forKey: key.rawValue) { return unsafeBitCast(cached, to: T.self) }
        } else if let cached = _cachedValue(forKey: key.rawValue, type: ObjectIdentifier(T.self)) {
            return unsafeDowncast(cached, to: _DecodedValue<T>.self).value
        }
        try throwPendingDataLoss(forKey: key.rawValue)
        return try readCaching(type, forKey: key)
    }

    /// The value stored for `key`, or `nil` when the key is absent from a store that was read.
    /// Values of non-`Sendable` types are decoded on every read.
    ///
    /// - Throws: `.unavailable`, `.decodingFailed`, `.invalidKey`; `.corrupted` once after a data
    ///   loss that may have hit `key`.
    public func retrieveOrThrow<T: Decodable>(type: T.Type, forKey key: any TinyStorageKey) throws -> T? {
        try throwPendingDataLoss(forKey: key.rawValue)
        return try read(type, forKey: key, version: nil)
    }

    // MARK: Internals

    /// The cached box for `key` when it holds a value decoded as `type` and the store is current.
    @usableFromInline
    func _cachedValue(forKey key: String, type: ObjectIdentifier) -> AnyObject? {
        engine.cachedValue(forKey: key, decodedAs: type)
    }

    /// The cached `Int` for `key` when it holds one and the store is current (no box: see
    /// `DecodedCache`).
    @usableFromInline
    func _cachedInt(forKey key: String) -> Int? {
        engine.cachedInt(forKey: key)
    }

    /// The full read: validates, opens or catches up, decodes, and caches value types.
    @usableFromInline
    func readCaching<T: Decodable & Sendable>(
        _ type: T.Type, forKey key: any TinyStorageKey
    ) throws(TinyStorageError) -> T? {
        var version: UInt64? = 0
        guard let value = try read(type, forKey: key, version: &version) else { return nil }
        // NB: a key a data loss may have hit is not cached until a throwing read reported it.
        if let version, !(T.self is AnyObject.Type), mayCacheValue(forKey: key.rawValue) {
            let decoded: DecodedCache =
                T.self == Int.self
                ? .int(unsafeBitCast(value, to: Int.self), box: _DecodedValue(value))
                : .boxed(_DecodedValue(value), type: ObjectIdentifier(T.self))
            engine.cache(decoded, forKey: key.rawValue, version: version)
        }
        return value
    }

    /// Reads and decodes; sets `version` (when given) to the decoded bytes' version.
    func read<T: Decodable>(
        _ type: T.Type, forKey key: any TinyStorageKey, version: UnsafeMutablePointer<UInt64?>?
    ) throws(TinyStorageError) -> T? {
        let name = try Self.validatedName(of: key)
        guard let stored = try engine.encodedValue(forKey: name) else { return nil }
        let value: T
        do {
            value = try ValueCoding.decode(T.self, from: stored.value, forKey: name)
        } catch {
            // NB: the slow path, through the older shapes a typed key declares. An upgraded value is
            // never cached: it is written back, or read (and written back) again next time.
            version?.pointee = nil
            return try readOlderShape(of: stored.value, as: T.self, key: key, name: name, failure: error)
        }
        version?.pointee = stored.version
        return value
    }

    /// Logs an error the non-throwing API swallows. Unavailability is logged by the engine when it
    /// changes, not on every call.
    @usableFromInline
    func report(_ error: TinyStorageError, file: String = #fileID, function: String = #function, line: Int = #line) {
        if error.code != .unavailable {
            logger.log(.error, error.description, file: file, function: function, line: line)
        }
    }
}

/// A decoded value kept for the next read of the same type.
@usableFromInline
final class _DecodedValue<Value: Sendable>: Sendable {
    @usableFromInline let value: Value

    init(_ value: Value) { self.value = value }
}

// MARK: The decoded-value cache

extension TinyStorage {
    /// How much of the store's values, in bytes as stored, this instance keeps decoded for
    /// repeated reads: 2 MiB unless set.
    ///
    /// A read decodes a value once and keeps it, so the next read of the key costs a hash table
    /// lookup. Past this limit, some values kept are dropped (their bytes stay in memory, so
    /// nothing is lost and nothing is read from disk): a later read of one decodes it again.
    /// Each value counts for the size of its stored bytes — for a `String` or `Data` close to
    /// what it holds decoded, less for a struct of many small fields. A single value larger than
    /// the limit is never kept. `0` keeps nothing decoded; a negative limit counts as `0`, and
    /// `Int.max` keeps every value read.
    ///
    /// ```swift
    /// // A widget with a large store and little memory to spare:
    /// storage.decodedValueCacheLimit = 256 * 1024
    /// ```
    ///
    /// Setting it drops values at once if those kept pass the new limit. Each instance has its own.
    public var decodedValueCacheLimit: Int {
        get { engine.withState { $0.index.decodedLimit } }
        set {
            engine.withState { state in
                state.index.decodedLimit = max(0, newValue)
                state.index.trimDecoded()
            }
        }
    }
}
