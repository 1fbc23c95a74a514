/// The index: every key's entry (its stored bytes and, once read, its decoded value), built
/// from the data file as read. One of the components of ``EngineState``.
///
/// **Owns** the entries, built (``built``) or still pending (``pending``: the file as read and
/// checked, not indexed yet, see ``PendingIndex``), the size a compacted file would have
/// (``liveBytes``), and the versions that tell a decode done outside the lock whether the
/// entry it read is still current (``CachedEntry/version``).
///
/// **Guarded by** the engine's lock (`Engine.state`). The index changes only as records are
/// applied (``apply(_:isExternal:collectChanges:collectValues:)``: commits of this process under
/// the commit lock, other processes' as a catch-up reads them), or when a whole read replaces it;
/// a decoded value is kept only if its entry did not change meanwhile (`Engine.cache`). A
/// pending index may be built on another thread without the lock (``PendingIndex`` is
/// immutable), and is put in place only if still pending.
///
/// **Under the lock, code may** look up, insert and remove entries. **It never** decodes or
/// encodes a value (`Codable` is the user's code: reads decode once the lock is released,
/// commits encode before they take it), builds a pending index of a store too large to walk in
/// the background, or calls out.
struct IndexState {
    /// Every key's entry. NB: built first from ``pending`` when the store was opened a moment ago
    /// and nothing has needed it yet (see ``PendingIndex``).
    var entries: EntryIndex {
        mutating get {
            buildPending()
            return built
        }
        set {
            pending = nil
            built = newValue
        }
        _modify {
            buildPending()
            yield &built
        }
    }
    /// The size a compacted file would have: the header plus one put record per entry.
    var liveBytes: Int {
        mutating get {
            buildPending()
            return builtLiveBytes
        }
        set {
            buildPending()
            builtLiveBytes = newValue
        }
    }
    /// What ``entries`` and ``liveBytes`` hold once built; use those, except where an index not
    /// built yet must stay so (a cached read finds nothing in it, and takes the full path).
    var built = EntryIndex()
    var builtLiveBytes = LogFormat.headerSize
    /// The data file as opened, checked but not indexed yet; `nil` once ``entries`` is built.
    var pending: PendingIndex?
    /// The last version given to an entry.
    var nextVersion: UInt64 = 0
    /// The most stored bytes of values kept decoded (``TinyStorage/decodedValueCacheLimit``).
    var decodedLimit = IndexState.defaultDecodedLimit
    /// At least the stored bytes of the entries holding a decoded value: raised by each value
    /// kept, made exact when it passes ``decodedLimit`` (entries replaced or removed meanwhile
    /// took their decoded values with them, uncounted).
    var decodedBytes = 0
    /// Where the next trim of decoded values starts, so successive trims drop different entries.
    var trimPosition = 0

    /// The most bytes a compacted file may take after a commit that makes it larger
    /// (``TinyStorage/sizeLimit``); `nil`: no limit.
    var sizeLimit: Int?

    /// ``TinyStorage/decodedValueCacheLimit``'s default: 2 MiB of stored values.
    static let defaultDecodedLimit = 2 << 20

    /// Keeps `decoded` in the entry at `position`, then drops other decoded values while those
    /// kept pass ``decodedLimit``; keeps nothing when the value alone is larger than the limit.
    mutating func keepDecoded(_ decoded: DecodedCache, at position: Int) {
        let size = built[entryAt: position].bytes.count
        guard size <= decodedLimit else { return }
        built[entryAt: position].decoded = decoded
        decodedBytes += size
        if decodedBytes > decodedLimit { trimDecoded(sparing: position) }
    }

    /// Drops decoded values (their bytes stay: a later read decodes again) until those kept
    /// take at most three quarters of ``decodedLimit``, so the next trim is a while away.
    ///
    /// NB: entries are visited from where the last trim stopped, in index order, not in the
    /// order they were read: tracking reads would add a write to every cached read.
    mutating func trimDecoded(sparing spared: Int? = nil) {
        decodedBytes = built.dropDecodedValues(
            downTo: decodedLimit / 4 * 3, sparing: spared, startingAt: &trimPosition)
    }

    /// Builds the index from ``pending``, if the store has one not built yet.
    mutating func buildPending() {
        guard let pending else { return }
        self.pending = nil
        (built, builtLiveBytes, nextVersion) = pending.build(numberingFrom: nextVersion)
    }

    /// Throws `.sizeLimitExceeded` when ``sizeLimit`` is set and `commit` would take the store's
    /// live bytes past it and make them larger than they are (a commit that shrinks the store, or
    /// keeps its size, always passes, so a store over a lowered limit can always be trimmed).
    func checkSizeLimit(_ commit: LogCommit) throws(TinyStorageError) {
        guard let sizeLimit else { return }
        // NB: the record sizes the commit's own operations left, for a key it changes twice.
        var changed: [String: Int?] = [:]
        var live = commit.clearsFirst ? LogFormat.headerSize : builtLiveBytes
        for index in commit.operations.indices {
            let key: String
            let newSize: Int?
            switch commit.operations[index] {
            case .put(let putKey, let value, _, let deadline):
                key = putKey
                newSize = LogCommit.putRecordSize(
                    keyLength: key.utf8.count, valueLength: value.count, expires: deadline != nil)
            case .remove(let removedKey): (key, newSize) = (removedKey, nil)
            }
            let oldSize = changed[key] ?? (commit.clearsFirst ? nil : built[key].map { Self.recordSize(key, $0) })
            if let oldSize { live -= oldSize }
            if let newSize { live += newSize }
            changed[key] = .some(newSize)
        }
        try Self.checkSizeLimit(sizeLimit, growingFrom: builtLiveBytes, to: live)
    }

    /// The size of the record a compacted file holds for `key` and its `entry`.
    @inline(__always)
    static func recordSize(_ key: String, _ entry: CachedEntry) -> Int {
        LogCommit.putRecordSize(keyLength: key.utf8.count, valueLength: entry.bytes.count, expires: entry.expires)
    }

    /// Throws `.sizeLimitExceeded` when `new` is past `limit` and larger than `old`.
    static func checkSizeLimit(_ limit: Int, growingFrom old: Int, to new: Int) throws(TinyStorageError) {
        guard new > limit, new > old else { return }
        throw TinyStorageError(
            .sizeLimitExceeded,
            "This write would take the store to \(new) bytes of live data, past its size limit of \(limit) "
                + "bytes (`sizeLimit`), so nothing was written. Remove values you no longer need, or raise the limit.")
    }

    /// Applies a verified commit's operations to the entries.
    ///
    /// A change names a key when what observers were told of it differs from what readers now
    /// see: an entry whose expiry was announced (or that had expired before this instance first
    /// read it, see ``ExpiryState/wasAnnounced(_:)``) counts as absent before, and one whose
    /// deadline has passed (by `clock`) as absent after. So a put of a value that has already
    /// expired, or the removal of one whose expiry was announced, announces nothing.
    ///
    /// - Parameters:
    ///   - collectChanges: `false` while loading a file, when nobody needs the keys.
    ///   - collectValues: Whether the change carries the keys' values (a value stream is open).
    ///   - expiry: Notes the deadlines the commit's puts hold (see ``ExpiryState/note(_:)``).
    ///   - clock: Read only when a put holds a deadline, at most once.
    /// - Returns: the keys whose bytes changed, or `nil` when none did (or none were collected).
    mutating func apply(
        _ commit: LogCommit, isExternal: Bool, collectChanges: Bool, collectValues: Bool,
        expiry: inout ExpiryState, clock: ExpiryClock
    ) -> ChangeSet? {
        // NB: built once here (a commit or catch-up right after the open), then the stored
        // entries are used: through the `entries` accessor each access cost a check and a copy.
        buildPending()
        var changed = SmallList<String>()
        var values: [StoredValue?] = []
        let collectValues = collectChanges && collectValues
        var now: UInt64?
        if commit.clearsFirst {
            if collectChanges {
                for (key, entry) in built where expiry.wasAnnounced(entry.deadline) {
                    changed.append(key)
                    if collectValues { values.append(nil) }
                }
            }
            built.removeAll()
            builtLiveBytes = LogFormat.headerSize
        }
        // NB: by index, here and where records are sized and written: iterating a SmallList copies
        // it (its element and its array), which cost a tenth of an overwrite.
        for index in commit.operations.indices {
            switch commit.operations[index] {
            case .put(let key, let value, let kind, let deadline):
                let keyLength = key.utf8.count
                nextVersion &+= 1
                // NB: the operation's `Data` is wrapped, not copied (see ``ValueBytes``).
                let bytes = ValueBytes(value)
                let entry = CachedEntry(bytes: bytes, version: nextVersion, kind: kind, deadline: deadline)
                var wasAnnounced = false
                if let old = built.updateValue(entry, forKey: key) {
                    if old.kind == kind, old.bytes == bytes, old.deadline == deadline {
                        built[key] = old  // unchanged: keep the decoded value
                        continue
                    }
                    builtLiveBytes -= Self.recordSize(key, old)
                    wasAnnounced = expiry.wasAnnounced(old.deadline)
                }
                builtLiveBytes += LogCommit.putRecordSize(
                    keyLength: keyLength, valueLength: value.count, expires: deadline != nil)
                var isVisible = true
                if let deadline {
                    expiry.note(deadline)
                    if now == nil { now = clock.now() }
                    isVisible = !deadline.hasPassed(at: now ?? 0)
                }
                if collectChanges, wasAnnounced || isVisible {
                    changed.append(key)
                    if collectValues {
                        values.append(isVisible ? StoredValue(bytes, kind: kind, deadline: deadline) : nil)
                    }
                }
            case .remove(let key):
                guard let old = built.removeValue(forKey: key) else { continue }
                builtLiveBytes -= Self.recordSize(key, old)
                if collectChanges, expiry.wasAnnounced(old.deadline) {
                    changed.append(key)
                    if collectValues { values.append(nil) }
                }
            }
        }
        guard !changed.isEmpty else { return nil }
        if commit.clearsFirst || commit.operations.count > 1 {
            // Keep each key once, with its last value.
            var last: [String: Int] = [:]
            for (index, key) in changed.enumerated() { last[key] = index }
            let keep = changed.indices.filter { last[changed[$0]] == $0 }
            changed = SmallList(keep.map { changed[$0] })
            if collectValues { values = keep.map { values[$0] } }
        }
        return ChangeSet(keys: changed, values: values, writeID: commit.writeID, isExternal: isExternal)
    }
}

/// One key's stored bytes and, once read, its decoded value.
///
/// NB: the fields are in this order so `kind` fills the padding after `decoded`'s tag, and the
/// deadline's 48 bits the padding after `kind`: 48 bytes a key, not 56 (memory held per key;
/// cached reads measured the same either way). A `Deadline?` there would have made it 64.
struct CachedEntry {
    var bytes: ValueBytes
    /// Bumped whenever `bytes` change, so a decode done outside the lock is cached only if still current.
    var version: UInt64
    /// The value decoded from `bytes`, once read. NB: only `Sendable` value types are cached, so
    /// two callers never share a class instance.
    var decoded: DecodedCache = .none
    /// How to read `bytes` (JSON, raw `Data`, or an original value of unknown meaning).
    var kind: ValueKind
    /// The deadline's milliseconds, bits 32 to 47 and 0 to 31; both 0: the value never expires.
    private var deadlineHigh: UInt16 = 0
    private var deadlineLow: UInt32 = 0

    init(bytes: ValueBytes, version: UInt64, decoded: DecodedCache = .none, kind: ValueKind, deadline: Deadline? = nil)
    {
        self.bytes = bytes
        self.version = version
        self.decoded = decoded
        self.kind = kind
        self.deadline = deadline
    }

    /// When the value expires; `nil`: never.
    var deadline: Deadline? {
        @inline(__always) get {
            guard expires else { return nil }
            return Deadline(milliseconds: UInt64(deadlineHigh) << 32 | UInt64(deadlineLow))
        }
        set {
            let milliseconds = newValue?.milliseconds ?? 0
            deadlineHigh = UInt16(truncatingIfNeeded: milliseconds >> 32)
            deadlineLow = UInt32(truncatingIfNeeded: milliseconds)
        }
    }

    /// Whether the value may expire: cheaper than reading ``deadline``, for the read path.
    @inline(__always)
    var expires: Bool { deadlineHigh != 0 || deadlineLow != 0 }

    /// Whether the value has expired at `now` (milliseconds since 1970).
    @inline(__always)
    func hasExpired(at now: UInt64) -> Bool {
        expires && now >= UInt64(deadlineHigh) << 32 | UInt64(deadlineLow)
    }

    /// The bytes, their kind and deadline, as a commit compares and a reader decodes them.
    var stored: StoredValue { StoredValue(bytes, kind: kind, deadline: deadline) }
}

/// What a ``CachedEntry`` keeps of its value once decoded.
///
/// NB: an `Int` is kept as it is, so a cached read of one retains and releases nothing (a box
/// cost it a fifth of its time), and in its box too, for the reads that ask for a box (typed
/// keys); other types in a `_DecodedValue<T>` box. As large as the box and its type alone were.
enum DecodedCache {
    case none
    /// An `Int`, and the same in a `_DecodedValue<Int>`.
    case int(Int, box: AnyObject)
    /// A `_DecodedValue<T>`, `type` being `ObjectIdentifier(T.self)`.
    case boxed(AnyObject, type: ObjectIdentifier)

    /// Whether a decoded value is kept.
    var isKept: Bool {
        if case .none = self { false } else { true }
    }
}
