import Foundation

extension TinyStorage {
    /// A key that knows the type of its value and the value to use when none is stored.
    ///
    /// Declare each key once, beside its default, and read it with a subscript that never returns
    /// an optional:
    ///
    /// ```swift
    /// extension TinyStorage.Key where Value == Int {
    ///     static var streak: Self { .init("streak", default: 0) }
    /// }
    /// extension TinyStorage.Key where Value == String? {
    ///     static var lastUser: Self { .init("lastUser") }  // default: nil
    /// }
    ///
    /// storage[.streak] += 1
    /// let streak = try storage.value(for: .streak)  // throws instead of guessing
    /// try storage.update(.streak) { streak in streak += 1 }  // atomic, also across processes
    /// ```
    ///
    /// The default is a read-side fallback only: it is **never written** to the store, so other
    /// processes and older app versions do not see it, and changing it in a later release changes
    /// what absent keys read as. A stored value always wins over the default — including one
    /// written by the register-defaults idiom, ``TinyStorage/bulkStore(items:skipKeyIfAlreadyPresent:writeID:)``
    /// with `skipKeyIfAlreadyPresent: true`, which writes defaults to disk where every process sees them.
    ///
    /// A key is also a ``TinyStorageKey``, so every other API accepts it (`contains`, `remove`,
    /// `retrieve`, `values(forKey:as:)`, `@TinyStorageItem`). Two keys are equal when their names
    /// are; the default and the older shapes a key reads (``migrating(from:_:)``) play no part.
    public struct Key<Value: Codable & Sendable>: TinyStorageKey {
        /// The name the value is stored under, as every other API and the `tinystorage` tool see it.
        ///
        /// ```swift
        /// TinyStorage.Key<Int>.streak.rawValue  // "streak"
        /// ```
        public let rawValue: String
        /// The value reads return when the key is absent (or, on the non-throwing paths, unreadable).
        ///
        /// Never written to the store; a stored value always wins over it.
        ///
        /// ```swift
        /// TinyStorage.Key<Int>.streak.defaultValue  // 0
        /// ```
        public let defaultValue: Value
        /// How long each value written through this key stays readable; `nil`: for ever.
        ///
        /// Every write through the key (its subscript, ``TinyStorage/update(_:writeID:_:)``,
        /// `@TinyStorageItem`) stores the value with a fresh deadline this long from then. Writes
        /// that name the key by its string use their own lifetime (see <doc:ExpiringValues>).
        ///
        /// ```swift
        /// TinyStorage.Key<String?>.sessionToken.expiresAfter  // .seconds(3600)
        /// ```
        public let expiresAfter: Duration?
        /// The older shapes of the value this key reads, newest first (see
        /// ``migrating(from:_:)``). NB: read only when the stored bytes do not decode as `Value`.
        @usableFromInline var migrations = OlderShapes<Value>()

        /// Creates a key stored under `name` that reads as `defaultValue` when absent.
        ///
        /// ```swift
        /// static var theme: Self { .init("theme", default: .system) }
        /// ```
        ///
        /// - Parameters:
        ///   - name: The stored name; it follows the rules of ``TinyStorageKey`` (checked on use).
        ///   - defaultValue: Returned when nothing is stored. Never written.
        public init(_ name: String, default defaultValue: Value) {
            self.rawValue = name
            self.defaultValue = defaultValue
            self.expiresAfter = nil
        }

        /// Creates a key stored under `name` whose values expire `lifetime` after each write, and
        /// which reads as `defaultValue` when absent or expired.
        ///
        /// ```swift
        /// extension TinyStorage.Key where Value == Int {
        ///     static var failedLogins: Self { .init("failedLogins", default: 0, expiresAfter: .seconds(15 * 60)) }
        /// }
        /// ```
        ///
        /// - Parameters:
        ///   - name: The stored name; it follows the rules of ``TinyStorageKey`` (checked on use).
        ///   - defaultValue: Returned when nothing is stored, or the value has expired. Never written.
        ///   - lifetime: How long each value written through the key stays readable: more than zero
        ///     (checked on each write, which fails with `.invalidExpiration` otherwise).
        public init(_ name: String, default defaultValue: Value, expiresAfter lifetime: Duration) {
            self.rawValue = name
            self.defaultValue = defaultValue
            self.expiresAfter = lifetime
        }

        /// Creates a key for an optional value whose default is `nil`.
        ///
        /// ```swift
        /// extension TinyStorage.Key where Value == Date? {
        ///     static var lastSync: Self { .init("lastSync") }
        /// }
        /// ```
        ///
        /// - Parameter name: The stored name.
        public init<Wrapped>(_ name: String) where Value == Wrapped? {
            self.init(name, default: nil)
        }

        /// Creates a key for an optional value whose default is `nil`, and whose values expire
        /// `lifetime` after each write.
        ///
        /// ```swift
        /// extension TinyStorage.Key where Value == String? {
        ///     static var sessionToken: Self { .init("sessionToken", expiresAfter: .seconds(3600)) }
        /// }
        /// ```
        ///
        /// - Parameters:
        ///   - name: The stored name.
        ///   - lifetime: How long each value written through the key stays readable: more than zero.
        public init<Wrapped>(_ name: String, expiresAfter lifetime: Duration) where Value == Wrapped? {
            self.init(name, default: nil, expiresAfter: lifetime)
        }

        /// The name the value is stored under (the same as ``rawValue``).
        ///
        /// ```swift
        /// print("reading \(TinyStorage.Key<Int>.streak.name)")
        /// ```
        public var name: String { rawValue }

        /// Two keys are equal when their stored names are equal; their defaults play no part.
        ///
        /// ```swift
        /// TinyStorage.Key("n", default: 1) == TinyStorage.Key("n", default: 2)  // true
        /// ```
        public static func == (lhs: Self, rhs: Self) -> Bool { lhs.rawValue == rhs.rawValue }

        /// Hashes the stored name, consistently with ``==(_:_:)``.
        ///
        /// ```swift
        /// let keys: Set = [TinyStorage.Key<Int>.streak]
        /// ```
        public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
    }

    /// The value stored for `key`, or its default; setting stores the new value.
    ///
    /// The getter returns ``Key/defaultValue`` when the key is absent (or its value expired), and
    /// also — after logging an error — when the store is unavailable or the stored bytes do not
    /// decode as `Value` (they are kept untouched). Use ``value(for:)`` where "unknown" must not
    /// read as the default. The setter stores the value in one atomic commit (setting `nil` on an
    /// optional key removes it), expiring after the key's ``Key/expiresAfter`` when it has one,
    /// and logs failures; use ``storeOrThrow(_:forKey:writeID:)`` to handle them.
    ///
    /// ```swift
    /// storage[.streak] += 1  // NB: two steps; use update(_:_:) when processes race
    /// ```
    @inlinable
    public subscript<Value>(key: Key<Value>) -> Value {
        get { typedValue(for: key) ?? key.defaultValue }
        // NB: the string API, called from code inlined into the caller: the value is wrapped for
        // it there, specialized, and the key passed by its name, unboxed.
        set {
            if let lifetime = key.expiresAfter {
                store(newValue, forKey: key.rawValue, expiresAfter: lifetime)
            } else {
                store(newValue, forKey: key.rawValue)
            }
        }
    }

    /// The value stored for `key`, or its default when the key is absent from a store that was read.
    ///
    /// ```swift
    /// do {
    ///     let streak = try storage.value(for: .streak)
    ///     print("\(streak) days")
    /// } catch TinyStorageError.Code.unavailable {
    ///     // Do not treat the streak as 0: it is unknown right now.
    /// } catch {
    ///     // .corrupted, .decodingFailed, .invalidKey: see below.
    /// }
    /// ```
    ///
    /// - Throws: `.unavailable` when the store cannot be read, `.decodingFailed` when the stored
    ///   bytes are not a `Value` (they are left untouched), `.invalidKey`; `.corrupted`, once, when
    ///   this process repaired the file and the damage may have held this key (see
    ///   ``retrieveOrThrow(type:forKey:)-1m0vx``).
    @inlinable
    public func value<Value>(for key: Key<Value>) throws -> Value {
        try _retrieveOrThrow(Value.self, forKey: key) ?? key.defaultValue
    }

    /// Reads, changes and writes back the value for `key` as one atomic step, starting from the
    /// default when the key is absent.
    ///
    /// Built on ``update(_:as:writeID:_:)``: no concurrent update, in this process or another, is
    /// lost. When the key is absent (or its value expired) and `body` leaves the default as it
    /// was, nothing is written (defaults stay unwritten); setting an optional value to `nil`
    /// removes the key. Through a key with ``Key/expiresAfter``, each update writes the value
    /// with a fresh deadline, even when `body` leaves it as it was; through other keys, the value
    /// keeps the deadline it had.
    ///
    /// ```swift
    /// let streak = try storage.update(.streak) { streak in
    ///     streak += 1
    ///     return streak
    /// }
    /// ```
    ///
    /// As there, `body` runs with no lock held and may run more than once (when another thread or
    /// process changed the key meanwhile): keep it free of side effects.
    ///
    /// - Returns: whatever the run of `body` whose result was committed returns.
    /// - Throws: `.unavailable`, `.invalidKey`, `.invalidWriteID`, `.decodingFailed` when the stored
    ///   bytes are not a `Value` (they are kept, `body` is not called), `.encodingFailed`,
    ///   file-system errors, or whatever `body` throws. Nothing is written when anything throws.
    @discardableResult
    public func update<Value, Result>(
        _ key: Key<Value>, writeID: String? = nil, _ body: (inout Value) throws -> Result
    ) throws -> Result {
        try update(key, as: Value.self, writeID: writeID, expiresAfter: key.expiresAfter) { (stored: inout Value?) in
            let wasAbsent = stored == nil
            var value = stored ?? key.defaultValue
            let result = try body(&value)
            if Self.isNil(value) {
                stored = nil
            } else if wasAbsent,
                try ValueCoding.encode(opened: value, forKey: key.rawValue)
                    == ValueCoding.encode(opened: key.defaultValue, forKey: key.rawValue)
            {
                stored = nil
            } else {
                stored = value
            }
            return result
        }
    }

    /// Whether a value is stored for `key` (its default does not count).
    ///
    /// ```swift
    /// if !storage.contains(.streak) { showOnboarding() }
    /// ```
    ///
    /// `false`, after logging an error, when the store is unavailable.
    public func contains<Value>(_ key: Key<Value>) -> Bool {
        contains(key as any TinyStorageKey)
    }

    /// Removes the value for `key`, so it reads as its default again. Logs an error on failure.
    ///
    /// ```swift
    /// storage.remove(.streak)
    /// ```
    public func remove<Value>(_ key: Key<Value>, writeID: String? = nil) {
        remove(key: key, writeID: writeID)
    }

    // MARK: Internals

    /// The value stored for `key`, or `nil` when absent (or, after logging, unavailable or not
    /// readable as `Value`).
    ///
    /// NB: inlined into the caller, as `retrieve(type:forKey:)` is, so that a cached read is
    /// specialized for `Value` (an `Int` is read without a box) and the key is never boxed as
    /// `any TinyStorageKey` (a heap allocation for a key larger than three words) but on the
    /// full read. Typed `Int` reads took 2.2 times as long as string-key reads before.
    @inlinable
    func typedValue<Value>(for key: Key<Value>) -> Value? {
        _retrieve(Value.self, forKey: key)
    }

    /// Stores a typed value, expiring after `lifetime` when given; a `nil` optional removes the
    /// key instead of storing JSON `null`.
    ///
    /// NB: the key stays generic: as `any TinyStorageKey` it would be boxed on the heap.
    func write<Value: Encodable>(
        typed value: Value, forKey key: some TinyStorageKey, writeID: String?, expiresAfter lifetime: Duration? = nil
    )
        throws(TinyStorageError)
    {
        try write(value, forKey: key, writeID: writeID, expiresAfter: lifetime)
    }

    /// Whether `value` is an `Optional` holding nothing (at any depth).
    static func isNil(_ value: Any) -> Bool {
        guard let optional = value as? any OptionalValue else { return false }
        guard let wrapped = optional.wrappedAny else { return true }
        return isNil(wrapped)
    }
}

/// Lets code that only knows `Any` look inside an `Optional`.
protocol OptionalValue {
    /// The wrapped value, or `nil`.
    var wrappedAny: Any? { get }
}

extension Optional: OptionalValue {
    var wrappedAny: Any? { self.map { $0 as Any } }
}
