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
    /// - Important: `body` runs while the store holds its locks, including the lock other processes
    ///   wait on: keep it short, and do not use the store (or any other store sharing this one's
    ///   directory) inside it — that deadlocks.
    /// - Returns: whatever `body` returns.
    /// - Throws: `.unavailable`, `.invalidKey`, `.invalidWriteID`, `.decodingFailed` when the stored
    ///   bytes are not a `Value` (they are kept, `body` is not called), `.encodingFailed`,
    ///   file-system errors, or whatever `body` throws. Nothing is written when anything throws.
    @discardableResult
    public func update<Value: Codable, Result>(
        _ key: any TinyStorageKey, as type: Value.Type = Value.self, writeID: String? = nil,
        _ body: (inout Value?) throws -> Result
    ) throws -> Result {
        let name = try Self.validatedName(of: key)
        let writeID = try Self.validatedWriteID(writeID)
        var bodyError: (any Error)?
        let result: Result? = try engine.commit { (entries) throws(TinyStorageError) -> Engine.Plan<Result?> in
            let stored = entries[name]?.stored
            var value = try stored.map { (stored) throws(TinyStorageError) in
                try ValueCoding.decode(Value.self, from: stored, forKey: name)
            }
            let result: Result
            do {
                result = try body(&value)
            } catch {
                bodyError = error
                return Engine.Plan(commit: nil, result: nil)
            }
            let encoded = try Self.encodedUnlessNil(value, forKey: name)
            guard encoded != stored else { return Engine.Plan(commit: nil, result: result) }
            let operation: LogOperation =
                if let encoded { .put(key: name, value: encoded.bytes, kind: encoded.kind) } else { .remove(key: name) }
            return Engine.Plan(commit: LogCommit(writeID: writeID, operations: [operation]), result: result)
        }
        if let bodyError { throw bodyError }
        // NB: `result` is nil only when `body` threw, handled above.
        guard let result else { throw TinyStorageError(.io, "The update did not run.", key: name) }
        return result
    }
}
