import Foundation

// Raw access for the `tinystorage` tool and the test helper: the stored bytes and their kind as
// they are on disk, without a Swift type in between. Not public API.
extension TinyStorage {
    /// Every key and its stored value (values that have expired left out).
    /// - Throws: `.unavailable`; `.corrupted`, once, when a repair found data loss (as the
    ///   throwing reads do, for any key it may have hit).
    package func rawEntries() throws(TinyStorageError) -> [String: StoredValue] {
        try throwPendingDataLossForAnyKey()
        // Copies: callers may index the bytes from 0, and stored values can be slices.
        return try engine.withLiveEntries { entries in
            entries.mapValues { StoredValue($0.bytes.detached(), kind: $0.kind, deadline: $0.deadline) }
        }
    }

    /// The stored value for `key`, or `nil` when absent (or expired).
    /// - Throws: `.unavailable`, `.invalidKey`.
    package func rawValue(forKey key: any TinyStorageKey) throws(TinyStorageError) -> StoredValue? {
        let name = try Self.validatedName(of: key)
        try throwPendingDataLoss(forKey: name)
        return try engine.withLiveEntries {
            $0[name].map { StoredValue($0.bytes.detached(), kind: $0.kind, deadline: $0.deadline) }
        }
    }

    /// Stores already-encoded values for each key in one atomic commit.
    ///
    /// - Throws: `.encodingFailed` when a JSON value is not valid JSON (nothing is written),
    ///   `.invalidKey`, `.invalidWriteID`, `.valueTooLarge`, `.unavailable`, file-system errors.
    package func storeRaw(_ items: [String: StoredValue], writeID: String? = nil) throws(TinyStorageError) {
        let writeID = try Self.validatedWriteID(writeID)
        var operations: [LogOperation] = []
        for (key, value) in items.sorted(by: { $0.key < $1.key }) {
            let name = try Self.validatedName(of: key)
            // NB: once: `bytes` copies a value held in a buffer of its own (``ValueBytes``).
            let bytes = value.bytes
            guard bytes.count <= Self.maximumValueSize else {
                throw TinyStorageError(
                    .valueTooLarge, "The value is larger than \(Self.maximumValueSize) bytes.", key: name)
            }
            if value.kind == .json {
                do {
                    _ = try JSONSerialization.jsonObject(with: bytes, options: [.fragmentsAllowed])
                } catch {
                    throw TinyStorageError(
                        .encodingFailed, "The value is not valid JSON. Nothing was written.", key: name,
                        underlying: error)
                }
            }
            operations.append(.put(key: name, value: bytes, kind: value.kind, deadline: value.deadline))
        }
        try engine.commit { entries in
            let changed = operations.filter { operation in
                guard case .put(let key, let value, let kind, let deadline) = operation else { return true }
                return entries[key]?.stored != StoredValue(value, kind: kind, deadline: deadline)
            }
            return Engine.Plan(
                commit: changed.isEmpty ? nil : LogCommit(writeID: writeID, operations: SmallList(changed)), result: ())
        }
    }

    /// Removes `key` and reports whether it was present.
    /// - Throws: `.unavailable`, `.invalidKey`, `.invalidWriteID`, file-system errors.
    package func removeOrThrow(key: any TinyStorageKey, writeID: String? = nil) throws(TinyStorageError) -> Bool {
        let name = try Self.validatedName(of: key)
        let writeID = try Self.validatedWriteID(writeID)
        return try engine.commit { entries in
            guard entries[name] != nil else { return Engine.Plan(commit: nil, result: false) }
            return Engine.Plan(commit: LogCommit(writeID: writeID, operations: [.remove(key: name)]), result: true)
        }
    }
}
