import Foundation

// The read path: answers from the index (``IndexState``) once the store is open and current,
// catching up first when the lock page says another process committed. Values are decoded by
// the caller once the engine's lock is released (`TinyStorage+Reading.swift`), and kept only if
// their entry did not change meanwhile (`cache`); the hot spots take the lock directly and call
// nothing under it.

extension Engine {
    /// Gives `body` the current entries: opened if needed, and caught up with other processes.
    func withEntries<R>(_ body: (inout EntryIndex) -> R) throws(TinyStorageError) -> R {
        try withState { (state) throws(TinyStorageError) -> R in
            try prepare(&state)
            return body(&state.index.entries)
        }
    }

    /// ``withLiveEntries(_:)``, also given the number of the last change queued: the entries
    /// reflect every change numbered up to it, and none numbered after.
    func withLiveEntriesAndLastChange<R>(
        _ body: (LiveEntries, _ lastChange: UInt64) -> R
    ) throws(TinyStorageError) -> R {
        try withState { (state) throws(TinyStorageError) -> R in
            try prepare(&state)
            return body(LiveEntries(state.index.entries, clock: options.clock), state.changes.lastSequence)
        }
    }

    /// The value cached for `key` if it was decoded as `type` before, with no decoding; `nil`
    /// sends the caller down the full path (absent, unavailable, not yet decoded…).
    ///
    /// NB: always inlined, with its closure, into `TinyStorage._cachedValue(forKey:type:)`, the
    /// one call a cached read makes into the library (the compiler left the closure a call of
    /// its own): cached `Int` reads measured about 6% faster.
    @inline(__always)
    func cachedValue(forKey key: String, decodedAs type: ObjectIdentifier) -> AnyObject? {
        // NB: the read path's hot spot; it calls nothing out, so it skips `withState`.
        state.withLock { state in
            // A pending data loss sends throwing reads down the full path, which reports it.
            // NB: `builtEntries`, not `entries`: an index not built yet has nothing cached, so
            // the lookup finds nothing and the full path reads the key (without building it).
            guard state.isOpen, state.isCurrent, state.recovery.pendingDataLoss == nil,
                let index = state.index.built.index(forKey: key)
            else { return nil }
            // NB: the entry is read in place (`_modify`): a getter would copy the entry out,
            // retaining and releasing its bytes and box, a fifth of a cached read. (While a
            // compaction's snapshot shares the index, this copies it once.)
            // NB: an entry that may expire reads the clock (a value past its deadline is left to
            // the full path, which finds it absent); others pay one comparison for it.
            if let deadline = state.index.built.deadline(at: index), deadline.hasPassed(at: options.clock.now()) {
                return nil
            }
            return Self.box(in: &state.index.built[entryAt: index], as: type)
        }
    }

    private static func box(in entry: inout CachedEntry, as type: ObjectIdentifier) -> AnyObject? {
        switch entry.decoded {
        case .boxed(let box, let boxedType) where boxedType == type: box
        case .int(_, let box) where type == ObjectIdentifier(Int.self): box
        default: nil
        }
    }

    /// The `Int` cached for `key`, as ``cachedValue(forKey:decodedAs:)`` is for other types (and
    /// inlined as it is).
    @inline(__always)
    func cachedInt(forKey key: String) -> Int? {
        state.withLock { state in
            guard state.isOpen, state.isCurrent, state.recovery.pendingDataLoss == nil,
                let index = state.index.built.index(forKey: key)
            else { return nil }
            if let deadline = state.index.built.deadline(at: index), deadline.hasPassed(at: options.clock.now()) {
                return nil
            }
            return Self.int(in: &state.index.built[entryAt: index])
        }
    }

    private static func int(in entry: inout CachedEntry) -> Int? {
        guard case .int(let value, _) = entry.decoded else { return nil }
        return value
    }

    /// The value stored for `key` and its version, or `nil` when absent or expired.
    ///
    /// Before the index of a store opened a moment ago is built, the key is looked up in the file
    /// as it was read and checked (see ``PendingIndex``); its version is `nil` then: nothing is
    /// cached for a value no entry holds yet.
    func encodedValue(forKey key: String) throws(TinyStorageError) -> (value: StoredValue, version: UInt64?)? {
        let found = try withState { (state) throws(TinyStorageError) -> (value: StoredValue, version: UInt64?)? in
            try prepare(&state)
            if let pending = state.index.pending, pending.isWalkable {
                return pending.value(forKey: key).map { ($0, nil) }
            }
            state.index.buildPending()
            return state.index.built[key].map { ($0.stored, $0.version) }
        }
        // NB: the clock is read with no lock held, and only for a value that may expire.
        if let found, found.value.deadline != nil, found.value.hasExpired(at: now) { return nil }
        return found
    }

    /// Keeps `decoded`, decoded from the entry's bytes at `version`, unless they changed meanwhile.
    func cache(_ decoded: DecodedCache, forKey key: String, version: UInt64) {
        state.withLock { state in
            // NB: `builtEntries`: an index not built yet holds no entry to keep it in.
            guard let index = state.index.built.index(forKey: key),
                state.index.built[entryAt: index].version == version
            else { return }
            state.index.keepDecoded(decoded, at: index)
        }
    }

    /// Builds the index of a store just opened in the background (``Options/indexBuildScheduler``,
    /// see ``PendingIndex``), from the file as read, without the engine's lock; puts it in place
    /// unless something needed the index meanwhile (and built it itself).
    func buildIndexSoon() {
        options.indexBuildScheduler.schedule { [weak self] in
            guard let self,
                let (pending, version) = state.withLock({ state in
                    state.index.pending.map { ($0, state.index.nextVersion) }
                })
            else { return }
            let built = pending.build(numberingFrom: version)
            state.withLock { state in
                guard state.index.pending === pending else { return }
                state.index.pending = nil
                (state.index.built, state.index.builtLiveBytes, state.index.nextVersion) = built
            }
        }
    }

    /// The data loss a repair found and no throwing read has reported yet; reported once.
    ///
    /// - Parameter catchingUp: Whether to open and catch up first, so a loss found now is
    ///   reported now; `false` right after a read that did (a loss found since concerns newer
    ///   bytes, which a cached read does not answer from: see `cache(_:forKey:version:)`).
    func takePendingDataLoss(catchingUp: Bool = true) -> TinyStorageError? {
        withState { state in
            if catchingUp { try? prepare(&state) }
            defer { state.recovery.pendingDataLoss = nil }
            return state.recovery.pendingDataLoss
        }
    }

    /// Why the store cannot be used right now, after one more attempt to open it; `nil` when it can.
    func currentFailure() -> TinyStorageError? {
        withState { state in
            do throws(TinyStorageError) {
                try prepare(&state)
                return nil
            } catch {
                return state.recovery.failure ?? error
            }
        }
    }
}
