package import Foundation

// Raw JSON access for the `tinystorage` tool and the test helper: the stored bytes as they are on
// disk, without a Swift type in between. Not public API.
extension TinyStorage {
    /// Every key and its stored JSON bytes.
    /// - Throws: `.unavailable`.
    package func rawEntries() throws(TinyStorageError) -> [String: Data] {
        // Copies: callers may index the bytes from 0, and stored values can be slices.
        try engine.withEntries { entries in entries.mapValues { $0.bytes.detached() } }
    }

    /// The stored JSON bytes for `key`, or `nil` when absent.
    /// - Throws: `.unavailable`, `.invalidKey`.
    package func rawValue(forKey key: any TinyStorageKey) throws(TinyStorageError) -> Data? {
        let name = try Self.validatedName(of: key)
        return try engine.withEntries { $0[name].map { $0.bytes.detached() } }
    }

    /// Stores already-encoded JSON for each key in one atomic commit.
    ///
    /// - Throws: `.encodingFailed` when any value is not valid JSON (nothing is written),
    ///   `.invalidKey`, `.valueTooLarge`, `.unavailable`, file-system errors.
    package func storeRaw(_ items: [String: Data], writeID: UUID? = nil) throws(TinyStorageError) {
        var operations: [LogOperation] = []
        for (key, json) in items.sorted(by: { $0.key < $1.key }) {
            let name = try Self.validatedName(of: key)
            guard json.count <= Self.maximumValueSize else {
                throw TinyStorageError(
                    .valueTooLarge, "The value is larger than \(Self.maximumValueSize) bytes.", key: name)
            }
            do {
                _ = try JSONSerialization.jsonObject(with: json, options: [.fragmentsAllowed])
            } catch {
                throw TinyStorageError(
                    .encodingFailed, "The value is not valid JSON. Nothing was written.", key: name, underlying: error)
            }
            operations.append(.put(key: name, value: json))
        }
        try engine.commit { entries in
            let changed = operations.filter { operation in
                guard case .put(let key, let value) = operation else { return true }
                return entries[key]?.bytes != value
            }
            return Engine.Plan(
                commit: changed.isEmpty ? nil : LogCommit(writeID: writeID, operations: changed), result: ())
        }
    }

    /// Removes `key` and reports whether it was present.
    /// - Throws: `.unavailable`, `.invalidKey`, file-system errors.
    package func removeOrThrow(key: any TinyStorageKey, writeID: UUID? = nil) throws(TinyStorageError) -> Bool {
        let name = try Self.validatedName(of: key)
        return try engine.commit { entries in
            guard entries[name] != nil else { return Engine.Plan(commit: nil, result: false) }
            return Engine.Plan(commit: LogCommit(writeID: writeID, operations: [.remove(key: name)]), result: true)
        }
    }
}
