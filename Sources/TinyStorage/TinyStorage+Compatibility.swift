import Foundation

extension TinyStorage {
    /// The `Bool` stored for `key`, or `false` when it is absent, unreadable or not a `Bool`.
    ///
    /// Kept for source compatibility with TinyStorage 2 and `UserDefaults`. It cannot tell "false"
    /// from "unknown": prefer `retrieveOrThrow(type: Bool.self, forKey:)` or a typed key.
    public func bool(forKey key: any TinyStorageKey) -> Bool {
        retrieve(type: Bool.self, forKey: key) ?? false
    }

    /// The `Int` stored for `key`, or `0` when it is absent, unreadable or not an `Int`.
    ///
    /// Kept for source compatibility with TinyStorage 2 and `UserDefaults`. It cannot tell "0" from
    /// "unknown", which is how streaks get reset: prefer `retrieveOrThrow(type: Int.self, forKey:)`
    /// or a typed key.
    public func integer(forKey key: any TinyStorageKey) -> Int {
        retrieve(type: Int.self, forKey: key) ?? 0
    }

    /// Adds `amount` to the `Int` stored for `key` (absent counts as 0) in one atomic
    /// read-modify-write, and returns the new value.
    ///
    /// ```swift
    /// let launches = storage.incrementInteger(forKey: "launches")
    /// ```
    ///
    /// - Parameters:
    ///   - key: The key whose `Int` is incremented.
    ///   - amount: What to add; negative subtracts.
    ///   - writeID: Passed on in ``didChangeNotification``; at most ``maximumWriteIDLength`` bytes.
    /// - Returns: the new value; or, when the increment fails, ``incrementFailed`` (`Int.min`),
    ///   after logging an error that names the key and the reason. Nothing is written then. It
    ///   fails when the store is unavailable, when the key holds something other than an `Int`
    ///   (the original library wrote `amount` over it; this one keeps the stored value), when the
    ///   result would leave `Int.min + 1 ... Int.max`, or when the writeID is invalid. Use
    ///   ``incrementIntegerOrThrow(forKey:by:writeID:)`` to tell these apart.
    @discardableResult
    public func incrementInteger(forKey key: any TinyStorageKey, by amount: Int = 1, writeID: String? = nil) -> Int {
        logging { () throws(TinyStorageError) in
            try increment(forKey: key, by: amount, writeID: writeID)
        } ?? Self.incrementFailed
    }

    /// What ``incrementInteger(forKey:by:writeID:)`` returns when it could not increment: `Int.min`.
    ///
    /// An increment never leaves a count at `Int.min` (it fails as an overflow instead), so this
    /// value is never a real count and cannot be mistaken for (or stored back as) one.
    ///
    /// ```swift
    /// let launches = storage.incrementInteger(forKey: "launches")
    /// if launches == TinyStorage.incrementFailed { return }  // logged; nothing was written
    /// ```
    public static let incrementFailed = Int.min

    /// Adds `amount` to the `Int` stored for `key` (absent counts as 0) in one atomic
    /// read-modify-write, and returns the new value.
    ///
    /// - Throws: `.unavailable`, `.decodingFailed` when the stored value is not an `Int` (it is
    ///   kept), `.encodingFailed` when the result would leave `Int.min + 1 ... Int.max` (see
    ///   ``incrementFailed``), `.invalidKey`, `.invalidWriteID`, or a file-system error. Nothing is
    ///   written then.
    @discardableResult
    public func incrementIntegerOrThrow(
        forKey key: any TinyStorageKey, by amount: Int = 1, writeID: String? = nil
    ) throws -> Int {
        try increment(forKey: key, by: amount, writeID: writeID)
    }

    /// ``incrementIntegerOrThrow(forKey:by:writeID:)``, with its error type known to the callers
    /// inside TinyStorage.
    func increment(forKey key: any TinyStorageKey, by amount: Int, writeID: String?) throws(TinyStorageError) -> Int {
        let name = try Self.validatedName(of: key)
        let writeID = try Self.validatedWriteID(writeID)
        return try engine.commit { (entries) throws(TinyStorageError) in
            let current =
                try entries[name].map { (entry) throws(TinyStorageError) in
                    try ValueCoding.decode(Int.self, from: entry.stored, forKey: name)
                } ?? 0
            let (next, overflow) = current.addingReportingOverflow(amount)
            // NB: Int.min is `incrementFailed`, so no increment may leave a count there.
            if overflow || next == Self.incrementFailed {
                throw TinyStorageError(
                    .encodingFailed,
                    "Adding \(amount) would take the count past Int.min + 1 ... Int.max. Nothing was written.",
                    key: name)
            }
            let stored = try ValueCoding.encode(opened: next, forKey: name)
            // NB: a count that expires keeps its deadline.
            let deadline = entries[name]?.deadline
            let commit =
                amount == 0 && entries[name] != nil
                ? nil
                : LogCommit(writeID: writeID, operations: [.put(key: name, value: stored.bytes, deadline: deadline)])
            return Engine.Plan(commit: commit, result: next)
        }
    }

    /// Stores every item in one atomic commit: after a crash, either all of them are stored or none.
    /// A `nil` value removes its key in the same commit.
    ///
    /// ```swift
    /// let items: [String: (any Codable)?] = ["theme": "dark", "fontSize": 14, "legacyFlag": nil]
    /// storage.bulkStore(items: items)
    /// ```
    ///
    /// Logs an error and stores nothing if any key or the writeID is invalid, or any value fails
    /// to encode. Items whose bytes are already stored, and removals of absent keys, are left out;
    /// when nothing is left, nothing is written or announced.
    ///
    /// **Registering defaults.** With `skipKeyIfAlreadyPresent: true`, keys that already hold a
    /// value keep it (a `nil` for them is ignored too) and only the missing ones are written,
    /// which makes this the way to register defaults at launch, as `UserDefaults.register(defaults:)`
    /// does — with one difference: the defaults are written to disk, so other processes (widgets,
    /// extensions, the `tinystorage` tool) see them too.
    ///
    /// ```swift
    /// storage.bulkStore(items: ["refreshMinutes": 15, "language": "en"], skipKeyIfAlreadyPresent: true)
    /// ```
    ///
    /// A typed key's default (``TinyStorage/Key``) is the other kind of default: a read-side
    /// fallback that is never written. A stored value always wins over it, including one written
    /// here: after registering `15`, `storage[.refreshMinutes]` reads `15` whatever default the key
    /// declares, and reads the key's default again only once the value is removed.
    ///
    /// - Parameters:
    ///   - items: Each key and its value; `nil`, or an optional holding `nil`, removes the key.
    ///     `Data` values are stored as their raw bytes, others as JSON.
    ///   - skipKeyIfAlreadyPresent: Whether keys that hold a value are left alone.
    ///   - writeID: Passed on in ``didChangeNotification``; at most ``maximumWriteIDLength`` bytes.
    public func bulkStore<Key: TinyStorageKey>(
        items: [Key: (any Encodable)?], skipKeyIfAlreadyPresent: Bool = false, writeID: String? = nil
    ) {
        logging { () throws(TinyStorageError) in
            try bulkCommit(items: items, skipKeyIfAlreadyPresent: skipKeyIfAlreadyPresent, writeID: writeID)
        }
    }

    /// Stores every item in one atomic commit: after a crash, either all of them are stored or none.
    /// A `nil` value removes its key in the same commit.
    ///
    /// ```swift
    /// try storage.bulkStoreOrThrow(items: ["theme": "dark", "legacyFlag": nil], writeID: "settings-sync")
    /// ```
    ///
    /// - Parameters: As ``bulkStore(items:skipKeyIfAlreadyPresent:writeID:)``.
    /// - Throws: `.invalidKey`, `.encodingFailed` or `.valueTooLarge` for any item (then nothing is
    ///   stored), `.invalidWriteID`, `.unavailable`, or a file-system error.
    public func bulkStoreOrThrow<Key: TinyStorageKey>(
        items: [Key: (any Encodable)?], skipKeyIfAlreadyPresent: Bool = false, writeID: String? = nil
    ) throws {
        try bulkCommit(items: items, skipKeyIfAlreadyPresent: skipKeyIfAlreadyPresent, writeID: writeID)
    }

    /// ``bulkStoreOrThrow(items:skipKeyIfAlreadyPresent:writeID:)``, with its error type known to
    /// the callers inside TinyStorage.
    ///
    /// - Parameter lifetime: How long the values stored stay readable; `nil`: for ever.
    func bulkCommit<Key: TinyStorageKey>(
        items: [Key: (any Encodable)?], skipKeyIfAlreadyPresent: Bool, writeID: String?,
        expiresAfter lifetime: Duration? = nil
    ) throws(TinyStorageError) {
        let writeID = try Self.validatedWriteID(writeID)
        let expiry = try lifetime.map { (lifetime) throws(TinyStorageError) in try deadline(after: lifetime) }
        var encoded: [(name: String, value: StoredValue?)] = []
        encoded.reserveCapacity(items.count)
        for (key, value) in items {
            let name = try Self.validatedName(of: key)
            var stored = try Self.encodedUnlessNil(value, forKey: name)
            stored?.deadline = expiry
            encoded.append((name, stored))
        }
        encoded.sort { $0.name < $1.name }
        try engine.commit { entries in
            var operations: [LogOperation] = []
            for (name, value) in encoded {
                let current = entries[name]?.stored
                if current != nil && skipKeyIfAlreadyPresent || current == value { continue }
                operations.append(LogOperation.setting(name, to: value))
            }
            return Engine.Plan(
                commit: operations.isEmpty ? nil : LogCommit(writeID: writeID, operations: SmallList(operations)),
                result: ())
        }
    }
}
