import Foundation

extension Engine {
    /// Sets `key` to `value`, or removes it when `value` is `nil`: the commit `store`, `set` and
    /// `remove` make, and most commits an app makes.
    ///
    /// It appends the same record as ``commit(_:)`` with a plan of that one operation would, and
    /// delivers the same change, through a shorter path: the key is hashed once (the general
    /// path looks it up for the plan and again to apply it), the record is written straight from
    /// the key and value (``SingleKeyRecord``), and no plan, operation list or change merging is
    /// built. With the changes around it (``afterAppend(_:)``, the inlined lock helpers), an
    /// `Int` overwrite went from 6,600 instructions through ``commit(_:)`` to about 4,000 here.
    ///
    /// Anything but the usual case goes through ``commit(_:)``, before anything is written: a
    /// store not open yet, or that another process committed to since it last looked, a file of
    /// an older format (a version 2 file and a value that expires included), or the remains of an
    /// append whose process died.
    ///
    /// - Throws: As ``commit(_:)``.
    func commitSingleKey(_ value: StoredValue?, forKey key: String, writeID: String?) throws(TinyStorageError) {
        _ = try TinyStorage.validatedWriteID(writeID)
        if options.readOnly { throw readOnlyRefusal }
        // NB: in the window until appended (or failed), so a flush about to begin waits for it.
        let ticket = durability == .immediate ? durableWindow.enter() : nil
        defer { ticket?.leave() }
        // NB: set beside the outcome rather than carried in it: an enum with this payload was
        // copied and destroyed out of line on the way out, about 100 instructions.
        var committed: CommittedAppend?
        let outcome = try withState { (state) throws(TinyStorageError) -> SingleKeyOutcome in
            guard state.isOpen, state.isCurrent, state.log.formatVersion >= LogFormat.version,
                value?.deadline == nil || state.log.formatVersion >= LogFormat.expiringVersion
            else { return .fallBack }
            state.index.buildPending()
            let outcome = try withFileLock(&state, appending: true) {
                (state) throws(TinyStorageError) -> SingleKeyOutcome in
                // NB: what the general path repairs or catches up with under the lock; nothing
                // has been changed yet, so it can start over there.
                guard !state.log.mayHaveDeadTail, holdsEveryRecord(state) else { return .fallBack }
                return try commitSingleKeyUnderLock(value, forKey: key, writeID: writeID, &state)
            }
            guard case .appended = outcome else { return outcome }
            ticket?.leave()
            committed = afterAppend(&state)
            return .appended
        }
        switch outcome {
        case .appended: if let committed { try finishCommit(committed) }
        case .unchanged: return
        case .fallBack:
            // NB: out of the window first: the general path enters it again, and a flush must
            // not wait for a commit that is itself waiting for a flush.
            ticket?.leave()
            try commit { entries in
                guard entries[key]?.stored != value else { return Plan(commit: nil, result: ()) }
                let operation = LogOperation.setting(key, to: value)
                return Plan(commit: LogCommit(writeID: writeID, operations: SmallList(operation)), result: ())
            }
        }
    }

    /// How a single-key commit went under the locks.
    private enum SingleKeyOutcome {
        /// Appended (``afterAppend(_:)`` says what is left to do once the locks are released).
        case appended
        /// The key already held the value: nothing was written.
        case unchanged
        /// Not the usual case: ``commit(_:)`` is to take it, from the start.
        case fallBack
    }

    /// Appends the record, then changes the entry and enqueues the change; a failed append
    /// changes nothing.
    ///
    /// NB: the key is looked up once, and its entry changed only after the append, so nothing
    /// is undone when the append fails and the entry it replaces is never copied out: swapping it
    /// out first, to put it back on failure, cost an overwrite about 100 instructions.
    ///
    /// - Returns: `.appended`, or `.unchanged` when the key already held `value` (nothing is
    ///   written then).
    @inline(__always)
    private func commitSingleKeyUnderLock(
        _ value: StoredValue?, forKey key: String, writeID: String?, _ state: inout EngineState
    ) throws(TinyStorageError) -> SingleKeyOutcome {
        let keyLength = key.utf8.count
        let slot = state.index.built.slot(forKey: key)
        let oldSize: Int?
        if let position = slot.position {
            if let value {
                if state.index.built.holds(value.storage, kind: value.kind, deadline: value.deadline, at: position) {
                    return .unchanged
                }
            } else if let deadline = state.index.built.deadline(at: position), deadline.hasPassed(at: now) {
                // NB: removing a value that expired changes nothing a reader sees: nothing is
                // written (a compaction drops it), and its expiry is announced as such.
                return .unchanged
            }
            oldSize = state.index.built.recordSize(at: position, keyLength: keyLength)
        } else {
            // NB: matched, not compared with `nil`: `!=` copied the value (retaining its bytes'
            // buffer) to compare it, and destroyed the copy.
            guard case .some = value else { return .unchanged }
            oldSize = nil
        }
        let newSize = value.map {
            LogCommit.putRecordSize(keyLength: keyLength, valueLength: $0.storage.count, expires: $0.deadline != nil)
        }
        if let limit = state.index.sizeLimit {
            let live = state.index.builtLiveBytes
            try IndexState.checkSizeLimit(limit, growingFrom: live, to: live - (oldSize ?? 0) + (newSize ?? 0))
        }
        let sequence = state.log.sequence + 1
        let start = state.log.end
        let mapped = try append(
            SingleKeyRecord(key: key, value: value, writeID: writeID, sequence: sequence), to: &state)
        state.log.sequence = sequence
        if let value {
            state.index.nextVersion &+= 1
            state.index.builtLiveBytes += newSize ?? 0
            // NB: the unwrapped copy is moved into the entry (`consume`): the entry took a copy of
            // its bytes and the unwrapped one was destroyed, a retain and a release more.
            let kind = value.kind
            let deadline = value.deadline
            if let deadline {
                state.expiry.note(deadline)
                requestExpiryWake(&state)
            }
            let entry = CachedEntry(
                bytes: (consume value).storage, version: state.index.nextVersion, kind: kind, deadline: deadline)
            // NB: moved in (`consume`): passed as it was, the entry was copied into the index
            // and this one destroyed, two value-witness calls.
            if slot.position != nil {
                state.index.built.replace(at: slot, with: consume entry)
            } else {
                state.index.built.insert(consume entry, forKey: key, at: slot)
            }
        } else {
            state.index.built.remove(at: slot)
        }
        if let oldSize { state.index.builtLiveBytes -= oldSize }
        // NB: enqueued under the lock, so changes are delivered in commit order; where the record
        // is in the mapping, as the span it fills (see `PendingChanges`).
        let carriesValue = state.changes.carriesValues
        if mapped, let base = state.log.appendMapping?.base {
            let end = state.log.end
            var schedule = state.changes.continueLogged(
                at: base, from: start, to: end, carriesValues: carriesValue)
            if schedule == nil, let mapping = state.log.appendMapping {
                schedule = state.changes.startLogged(
                    through: mapping, io: io, from: start, to: end, carriesValues: carriesValue)
            }
            if let schedule {
                if schedule { delivery.scheduleDrain() }
                return .appended
            }
        }
        enqueueChange(in: &state) { sequence in
            ChangeSet(
                keys: SmallList(key), values: carriesValue ? [value] : [], writeID: writeID, isExternal: false,
                sequence: sequence)
        }
        return .appended
    }
}
