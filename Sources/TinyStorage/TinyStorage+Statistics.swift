import Foundation

extension TinyStorage {
    /// How large a store is, and what makes it so: see ``statistics``.
    ///
    /// ```swift
    /// let statistics = try storage.statistics
    /// print("\(statistics.keyCount) keys, \(statistics.liveBytes) bytes of live data")
    /// ```
    public struct Statistics: Sendable, Equatable {
        /// The data file's size in bytes, as the file system reports it: the live data, the older
        /// records compaction has not removed yet, and space reserved ahead of the next commits.
        /// `0` for an in-memory store.
        public var fileSize: Int
        /// The bytes a compacted data file would take: the file's header, and one record per key
        /// with its key, its stored value (and deadline) and the record's framing; values that
        /// have expired are left out, as a compaction leaves them out. ``TinyStorage/sizeLimit``
        /// bounds this figure, counting expired values until a compaction removes them.
        public var liveBytes: Int
        /// The number of keys that hold a value (one that has not expired).
        public var keyCount: Int
        /// The keys whose stored values are the largest, largest first (ties in key order), at
        /// most ``largestKeysListed``.
        public var largestKeys: [KeySize]

        /// How many keys ``largestKeys`` lists at most.
        public static let largestKeysListed = 10

        /// A key and the size of its stored value.
        public struct KeySize: Sendable, Equatable {
            /// The key.
            public var key: String
            /// The stored (encoded) value's size in bytes: JSON, or a `Data` value's own bytes.
            public var bytes: Int
        }
    }

    /// How large the store is: its file, its live data, its keys and the largest of them.
    ///
    /// Catches up with other processes first, as a read does.
    ///
    /// ```swift
    /// for entry in try storage.statistics.largestKeys {
    ///     print(entry.key, entry.bytes)
    /// }
    /// ```
    ///
    /// - Throws: `.unavailable` when the store cannot be read: no figure is made up then.
    public var statistics: Statistics {
        get throws {
            try engine.statistics()
        }
    }

    /// The most bytes of live data (``Statistics/liveBytes``) a write may leave the store with;
    /// `nil`, the default, sets no limit.
    ///
    /// A write (`store`, `bulkStore`, `update`, `incrementInteger`, a typed key, a key group)
    /// that would take the store past the limit, and make it larger than it is, throws
    /// ``TinyStorageError/Code/sizeLimitExceeded`` and writes nothing (the non-throwing calls
    /// log it); writes that shrink the store or keep its size always succeed, so a store over a
    /// lowered limit can still be trimmed. The data file itself grows past the live data until
    /// compaction rewrites it (up to four times it, and at least 1 MiB), so a limit of `L` keeps
    /// the file under about `max(4 × L, 1 MiB)` plus a record.
    ///
    /// The limit belongs to this instance, not to the file: every process that writes the store
    /// should set the same one. A limit below 0 counts as 0.
    ///
    /// ```swift
    /// storage.sizeLimit = 512 * 1024
    /// do {
    ///     try storage.storeOrThrow(largeHistory, forKey: "history")
    /// } catch TinyStorageError.Code.sizeLimitExceeded {
    ///     storage.remove(key: "history")  // start over rather than grow without bound
    /// }
    /// ```
    public var sizeLimit: Int? {
        get { engine.withState { $0.index.sizeLimit } }
        set { engine.withState { $0.index.sizeLimit = newValue.map { max(0, $0) } } }
    }
}

extension Engine {
    /// ``TinyStorage/statistics``, under the engine's lock.
    func statistics() throws(TinyStorageError) -> TinyStorage.Statistics {
        try withState { (state) throws(TinyStorageError) -> TinyStorage.Statistics in
            try prepare(&state)
            var fileSize = 0
            if let file = state.log.dataFile {
                switch io.status(file.fd) {
                case .success(let status): fileSize = status.size
                case .failure(let error): throw .system(error, "inspect", path: location.dataPath)
                }
            }
            var sizes: [TinyStorage.Statistics.KeySize] = []
            sizes.reserveCapacity(state.index.entries.count)
            var liveBytes = state.index.liveBytes
            let now = self.now
            for (key, entry) in state.index.entries {
                if entry.hasExpired(at: now) {
                    liveBytes -= IndexState.recordSize(key, entry)
                } else {
                    sizes.append(.init(key: key, bytes: entry.bytes.count))
                }
            }
            return TinyStorage.Statistics(fileSize: fileSize, liveBytes: liveBytes, sizes: sizes)
        }
    }
}

extension TinyStorage.Statistics {
    /// The statistics of a store whose keys hold values of these `sizes`.
    init(fileSize: Int, liveBytes: Int, sizes: [KeySize]) {
        self.fileSize = fileSize
        self.liveBytes = liveBytes
        keyCount = sizes.count
        largestKeys = Array(
            sizes.sorted { $0.bytes != $1.bytes ? $0.bytes > $1.bytes : $0.key < $1.key }
                .prefix(Self.largestKeysListed))
    }
}

extension StoreInspection {
    /// The statistics of the store as the inspection read it (`tinystorage info`): its live bytes
    /// are those of a file compacted from the records that verified.
    package var statistics: TinyStorage.Statistics {
        var liveBytes = LogFormat.headerSize
        var sizes: [TinyStorage.Statistics.KeySize] = []
        for (key, value) in entries {
            liveBytes += LogCommit.putRecordSize(
                keyLength: key.utf8.count, valueLength: value.bytes.count, expires: value.deadline != nil)
            sizes.append(.init(key: key, bytes: value.bytes.count))
        }
        return TinyStorage.Statistics(fileSize: fileSize, liveBytes: liveBytes, sizes: sizes)
    }
}
