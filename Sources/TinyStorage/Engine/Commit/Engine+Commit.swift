import Foundation

extension Engine {
    /// What a commit's builder decided.
    struct Plan<Result> {
        /// The record to append, or `nil` when nothing changes.
        var commit: LogCommit?
        var result: Result
    }

    /// Runs `build` against the current entries under both locks and appends the commit it returns.
    ///
    /// The steps, each in a function of its own:
    /// 1. An `.immediate` commit enters the durable window (``DurableCommitWindow``), so a flush
    ///    about to begin waits for its append and covers it (group commit).
    /// 2. Under the engine's lock: the store is opened and caught up with other processes, a
    ///    replaced file read again, the index of a store opened a moment ago built (``prepare(_:)``):
    ///    the slow part, kept out of the commit lock.
    /// 3. Under the commit lock (``withFileLock(_:appending:_:)``, Engine+Locking.swift):
    ///    ``commitUnderFileLock(_:_:deadTailCut:)`` confirms where the log ends from the data file,
    ///    cuts what a dead writer left past it, builds the plan, appends its record and queues its
    ///    change.
    /// 4. Back under the engine's lock alone: ``afterAppend(_:)`` wakes the other processes and
    ///    schedules a `.standard` commit's flush (Durability/Engine+Flushing.swift).
    /// 5. With no lock held: the dead tail cut is copied to `quarantine/`, an `.immediate` commit
    ///    is flushed, a log grown past its live data is compacted (``finishCommit(_:)``).
    ///
    /// A file replaced under step 3 has the commit start over at step 2; a file of an older
    /// format is first rewritten in the current one (a compaction), then appended to. The
    /// platform's differences (which commit lock, mapped or written appends) are decided by the
    /// lock file and the log, from ``Platform``, not here.
    ///
    /// `build` must be the engine's own code: it runs while the cross-process lock is held. (User
    /// closures run before, see `TinyStorage.update`.)
    ///
    /// - Returns: `build`'s result.
    /// - Throws: `.unavailable` when the store cannot be opened, system errors from the append,
    ///   and whatever `build` throws: nothing is written then. `.io` when an `.immediate` commit's
    ///   flush fails: the commit is in the file then (other processes may already read it) but
    ///   not known to be on stable storage.
    func commit<Result>(
        _ build: (LiveEntries) throws(TinyStorageError) -> Plan<Result>
    ) throws(TinyStorageError) -> Result {
        if options.readOnly { throw readOnlyRefusal }
        let ticket = durability == .immediate ? durableWindow.enter() : nil
        defer { ticket?.leave() }
        var upgrades = 0
        var deadTailCut = false
        while true {
            var committed: CommittedAppend?
            let attempt = try withState { (state) throws(TinyStorageError) -> CommitAttempt<Result> in
                try prepare(&state)
                state.index.buildPending()
                let appending = state.log.formatVersion >= LogFormat.version
                let attempt = try withFileLock(&state, appending: appending) {
                    (state) throws(TinyStorageError) -> CommitAttempt<Result> in
                    try commitUnderFileLock(build, &state, deadTailCut: &deadTailCut)
                }
                if case .done(_, appended: true) = attempt {
                    ticket?.leave()
                    committed = afterAppend(&state)
                }
                return attempt
            }
            switch attempt {
            case .done(let result, _):
                if deadTailCut { withState { setAsideDeadTail(&$0) } }
                if let committed { try finishCommit(committed) }
                return result
            case .fileReplaced:
                continue
            case .olderFormat(let version):
                upgrades += 1
                guard upgrades <= 8 else {
                    throw TinyStorageError(
                        .io,
                        "The data file '\(location.dataPath)' could not be rewritten in the current format; try again.")
                }
                try compactNow(upgradingTo: version)
            }
        }
    }

    /// What one attempt at a commit came to under the commit lock.
    private enum CommitAttempt<Result> {
        /// The plan's result, and whether its record was appended (`false`: nothing changed).
        case done(Result, appended: Bool)
        /// The data file was replaced since this state read it: read the new one, then try again.
        case fileReplaced
        /// The data file is of an older format than the commit needs (a version 1 file, or a
        /// version 2 one for a value that expires): rewrite it in `version`, then try again.
        case olderFormat(UInt32)
    }

    /// Step 3 of ``commit(_:)``, under both locks: the state is made to hold every record of
    /// the data file (the lock page says whether anything is new; the file confirms it), what
    /// lies past the log's end is cut, then the plan is built from the entries and its record
    /// appended and applied, and its change queued (under the lock, so changes are delivered in
    /// commit order).
    ///
    /// - Parameter deadTailCut: Set when the remains of a dead append were cut, to be set aside.
    @inline(__always)
    private func commitUnderFileLock<Result>(
        _ build: (LiveEntries) throws(TinyStorageError) -> Plan<Result>, _ state: inout EngineState,
        deadTailCut: inout Bool
    ) throws(TinyStorageError) -> CommitAttempt<Result> {
        if !holdsEveryRecord(state), try !catchUpUnderLock(&state) { return .fileReplaced }
        if state.log.mayHaveDeadTail {
            try cutDeadTail(&state)
            deadTailCut = state.recovery.deadTail != nil
        }
        // NB: the plan is built from the stored entries, so the index must be built (it is,
        // unless what raced in under the lock reloaded the file: then it is now).
        state.index.buildPending()
        var plan = try build(LiveEntries(state.index.built, clock: options.clock))
        // NB: moved out of the plan (`take`), not copied.
        guard var commit = plan.commit.take() else { return .done(plan.result, appended: false) }
        // NB: every API checks its writeID first; this keeps a longer one out of the format.
        _ = try TinyStorage.validatedWriteID(commit.writeID)
        // NB: a file only ever holds records of its header's version: a version 1 file is
        // rewritten before anything is appended, a version 2 one before a value that expires.
        let required = commit.requiredVersion
        if state.log.formatVersion < required || state.log.formatVersion == 1, !state.inMemory {
            return .olderFormat(max(required, state.log.formatVersion))
        }
        try state.index.checkSizeLimit(commit)
        commit.sequence = state.log.sequence + 1
        try append(commit, to: &state)
        if let change = apply(commit, to: &state, isExternal: false) { enqueueChange(change, in: &state) }
        return .done(plan.result, appended: true)
    }

    /// Applies a verified commit to the state: its records are the log's (``LogState/sequence``),
    /// its operations the index's (``IndexState/apply(_:isExternal:collectChanges:collectValues:)``).
    ///
    /// - Parameter collectChanges: `false` while loading a file, when nobody needs the keys.
    /// - Returns: the keys whose bytes changed, or `nil` when none did (or none were collected).
    @discardableResult
    func apply(
        _ commit: LogCommit, to state: inout EngineState, isExternal: Bool, collectChanges: Bool = true
    ) -> ChangeSet? {
        if commit.sequence != 0 { state.log.sequence = commit.sequence }
        let change = state.index.apply(
            commit, isExternal: isExternal, collectChanges: collectChanges, collectValues: state.changes.carriesValues,
            expiry: &state.expiry, clock: options.clock)
        requestExpiryWake(&state)
        return change
    }
}
