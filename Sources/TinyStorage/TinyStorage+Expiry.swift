public import Foundation

extension TinyStorage {
    /// Stores `value` for `key` in one atomic commit, to read as absent once `lifetime` has
    /// passed; `nil` removes the key.
    ///
    /// ```swift
    /// storage.store(token, forKey: "sessionToken", expiresAfter: .seconds(3600))
    /// ```
    ///
    /// The deadline is the wall clock now plus `lifetime`, stored with the value, so every process
    /// and every later launch agrees on it: from then on, ``retrieve(type:forKey:)-64we2`` returns
    /// `nil`, `contains(_:)` `false`, and ``allKeys`` leaves the key out, in every process,
    /// and observers hear that the key changed. A compaction removes the value from the file. Storing
    /// the key again sets a new deadline, or none (`store(_:forKey:writeID:)` stores a value that
    /// never expires). Setting the device's clock forward expires values early; setting it back
    /// makes a value that a compaction has not removed yet readable again until its deadline. See
    /// <doc:ExpiringValues>.
    ///
    /// Logs an error and changes nothing when `lifetime` is not positive, the value cannot be
    /// encoded, the key or writeID is invalid, or the store is unavailable; use
    /// ``storeOrThrow(_:forKey:writeID:expiresAfter:)`` to handle those cases.
    ///
    /// - Parameters:
    ///   - value: The value to store; `nil` (or an optional holding `nil`) removes the key.
    ///   - key: Where to store it.
    ///   - writeID: Passed on in ``didChangeNotification``, as for ``store(_:forKey:writeID:)``.
    ///   - lifetime: How long the value stays readable: more than zero. Deadlines are kept to the
    ///     millisecond (a shorter lifetime counts as one), and none lies past the year 10889.
    public func store(
        _ value: (any Encodable)?, forKey key: any TinyStorageKey, writeID: String? = nil,
        expiresAfter lifetime: Duration
    ) {
        logging { () throws(TinyStorageError) in
            try write(value, forKey: key, writeID: writeID, expiresAfter: lifetime)
        }
    }

    /// Stores `value` for `key` in one atomic commit, to read as absent once `lifetime` has
    /// passed; `nil` removes the key.
    ///
    /// ```swift
    /// try storage.storeOrThrow(code, forKey: "verificationCode", expiresAfter: .seconds(10 * 60))
    /// ```
    ///
    /// - Throws: `.invalidExpiration` when `lifetime` is zero or negative; otherwise as
    ///   ``storeOrThrow(_:forKey:writeID:)``. When it throws, nothing was written.
    public func storeOrThrow(
        _ value: (any Encodable)?, forKey key: any TinyStorageKey, writeID: String? = nil,
        expiresAfter lifetime: Duration
    ) throws {
        do {
            try write(value, forKey: key, writeID: writeID, expiresAfter: lifetime)
        } catch {
            throw Self.asOriginalLibraryThrowsIt(error)
        }
    }

    /// When the value stored for `key` expires: `nil` when the key holds a value that never
    /// expires, or no value (none was stored, it was removed, or it has expired).
    ///
    /// ```swift
    /// if let expiry = try storage.expiration(forKey: "sessionToken"), expiry.timeIntervalSinceNow < 60 {
    ///     refreshSession()
    /// }
    /// ```
    ///
    /// The date is the deadline stored with the value, to the millisecond.
    ///
    /// - Throws: `.unavailable` when the store cannot be read (never `nil` then), `.invalidKey`.
    public func expiration(forKey key: any TinyStorageKey) throws -> Date? {
        let name = try Self.validatedName(of: key)
        return try engine.encodedValue(forKey: name)?.value.deadline?.date
    }

    /// Stores every item in one atomic commit, each value to read as absent once `lifetime` has
    /// passed; a `nil` value removes its key in the same commit.
    ///
    /// ```swift
    /// storage.bulkStore(items: ["offerID": "spring", "offerPrice": 4.99], expiresAfter: .seconds(86_400))
    /// ```
    ///
    /// Every value gets the same deadline. Otherwise as
    /// ``bulkStore(items:skipKeyIfAlreadyPresent:writeID:)``: with `skipKeyIfAlreadyPresent`,
    /// keys holding a value that has not expired keep it. Logs an error and stores nothing when
    /// `lifetime` is not positive, or any key, value or the writeID is invalid.
    ///
    /// - Parameters:
    ///   - items: Each key and its value; `nil` removes the key.
    ///   - skipKeyIfAlreadyPresent: Whether keys that hold a value are left alone.
    ///   - writeID: Passed on in ``didChangeNotification``.
    ///   - lifetime: How long the values stay readable: more than zero.
    public func bulkStore<Key: TinyStorageKey>(
        items: [Key: (any Encodable)?], skipKeyIfAlreadyPresent: Bool = false, writeID: String? = nil,
        expiresAfter lifetime: Duration
    ) {
        logging { () throws(TinyStorageError) in
            try bulkCommit(
                items: items, skipKeyIfAlreadyPresent: skipKeyIfAlreadyPresent, writeID: writeID,
                expiresAfter: lifetime)
        }
    }

    /// Stores every item in one atomic commit, each value to read as absent once `lifetime` has
    /// passed; a `nil` value removes its key in the same commit.
    ///
    /// ```swift
    /// try storage.bulkStoreOrThrow(items: ["offerID": "spring"], expiresAfter: .seconds(86_400))
    /// ```
    ///
    /// - Throws: `.invalidExpiration` when `lifetime` is zero or negative; otherwise as
    ///   ``bulkStoreOrThrow(items:skipKeyIfAlreadyPresent:writeID:)``. Nothing is stored then.
    public func bulkStoreOrThrow<Key: TinyStorageKey>(
        items: [Key: (any Encodable)?], skipKeyIfAlreadyPresent: Bool = false, writeID: String? = nil,
        expiresAfter lifetime: Duration
    ) throws {
        try bulkCommit(
            items: items, skipKeyIfAlreadyPresent: skipKeyIfAlreadyPresent, writeID: writeID, expiresAfter: lifetime)
    }

    // MARK: Internals

    /// The deadline `lifetime` from now, by the store's clock (for the `tinystorage` tool, which
    /// stores encoded values with ``storeRaw(_:writeID:)``).
    ///
    /// - Throws: `.invalidExpiration` when `lifetime` is not positive (a `Duration` is always finite).
    package func deadline(after lifetime: Duration) throws(TinyStorageError) -> Deadline {
        guard lifetime > .zero else {
            throw TinyStorageError(
                .invalidExpiration,
                "A value's lifetime (expiresAfter:) must be more than zero; it was \(lifetime). Nothing was written.")
        }
        return Deadline(after: lifetime, from: engine.now)
    }
}
