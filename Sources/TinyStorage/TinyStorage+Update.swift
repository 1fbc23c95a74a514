import Foundation

extension TinyStorage {
    /// Reads, changes and writes back the value for `key` as one atomic step, so no concurrent
    /// update, in this process or another, is ever lost.
    ///
    /// `body` receives the current value (`nil` when absent) and may change it; setting it to `nil`
    /// removes the key. The result is written only when its bytes differ from what is stored.
    ///
    /// ```swift
    /// try storage.update("visits", as: Visits.self) { visits in
    ///     visits = (visits ?? Visits()).adding(today)
    /// }
    /// ```
    ///
    /// `body` runs with no lock held, so it may take its time and may read the store. The result
    /// is committed only if the key still holds the bytes `body` started from; if another thread
    /// or process changed the key meanwhile, `body` runs again with the new value. So `body` may
    /// run more than once: keep it free of side effects, and return what it computed rather than
    /// acting on it.
    ///
    /// A value that expires keeps its deadline through an update (a counter stored with
    /// `expiresAfter:` still expires when it was to); a value that has expired reaches `body` as
    /// `nil`.
    ///
    /// - Returns: whatever the run of `body` whose result was committed returns.
    /// - Throws: `.unavailable`, `.invalidKey`, `.invalidWriteID`, `.decodingFailed` when the stored
    ///   bytes are not a `Value` (they are kept, `body` is not called), `.encodingFailed`,
    ///   file-system errors, or whatever `body` throws. Nothing is written when anything throws.
    @discardableResult
    public func update<Value: Codable, Result>(
        _ key: any TinyStorageKey, as type: Value.Type = Value.self, writeID: String? = nil,
        _ body: (inout Value?) throws -> Result
    ) throws -> Result {
        try update(key, as: type, writeID: writeID, expiresAfter: nil, body)
    }

    /// ``update(_:as:writeID:_:)``, giving the value written a fresh deadline `lifetime` from
    /// the commit when given (a typed key's ``Key/expiresAfter``), keeping its deadline otherwise.
    func update<Value: Codable, Result>(
        _ key: any TinyStorageKey, as type: Value.Type, writeID: String?, expiresAfter lifetime: Duration?,
        _ body: (inout Value?) throws -> Result
    ) throws -> Result {
        let name = try Self.validatedName(of: key)
        let writeID = try Self.validatedWriteID(writeID)
        if let lifetime { _ = try deadline(after: lifetime) }  // NB: refused before `body` runs.
        while true {
            // NB: read, decode, run `body` and encode with no lock held; only the comparison and
            // the append happen under the locks.
            let stored = try engine.encodedValue(forKey: name)?.value
            var value: Value?
            var upgrade: TypeUpgrade?
            if let stored {
                // NB: a value in an older shape the key declares is upgraded and committed with `body`'s changes.
                (value, upgrade) = try Self.decode(Value.self, from: stored, key: key, name: name)
            }
            let result = try body(&value)
            var encoded = try Self.encodedUnlessNil(value, forKey: name)
            encoded?.deadline =
                try lifetime.map { (lifetime) throws(TinyStorageError) in try deadline(after: lifetime) }
                ?? stored?.deadline
            let committed = try engine.commit { entries -> Engine.Plan<Bool> in
                guard entries[name]?.stored == stored else { return Engine.Plan(commit: nil, result: false) }
                guard encoded != stored else { return Engine.Plan(commit: nil, result: true) }
                let operation = LogOperation.setting(name, to: encoded)
                return Engine.Plan(commit: LogCommit(writeID: writeID, operations: [operation]), result: true)
            }
            guard committed else { continue }
            if let upgrade, encoded != nil, encoded != stored { noteTypeMigration(of: name, upgrade) }
            return result
        }
    }
}
