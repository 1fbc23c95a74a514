import Foundation

// How the state learns what other processes committed: the lock page says whether anything is
// new (a hint); the data file says what (records that verify and continue the sequence). The
// log's end moves here only past records read and checked (`applyTail`), and under the commit
// lock nothing is appended until the file confirms the state holds every record
// (`holdsEveryRecord`). Runs under the engine's lock; reads only, never writes or flushes.

extension Engine {
    /// Publishes the log's end when the page, for this file, says less: records that verify and
    /// continue the sequence were found past it. Call under the file lock, caught up.
    ///
    /// - Returns: whether it published (signal the change once the lock is let go).
    func publishIfBehind(_ state: inout EngineState) -> Bool {
        guard let coordination = state.coordination.file, state.log.dataFile != nil, coordination.isInitialized else {
            return false
        }
        let published = coordination.published
        guard published.generation == state.log.generation, published.length < state.log.end else { return false }
        state.coordination.seenSequence = coordination.publish(generation: state.log.generation, length: state.log.end)
        return true
    }

    /// Whether the state holds every record of the data file, under the commit lock, before an
    /// append or a rewrite: the page says nothing was committed since this state's last look (a
    /// hint), and the file confirms it, holding nothing at the state's end (zeros, or its end). A
    /// page put back or written over under running processes can say nothing changed while
    /// another process's record lies there; appending on that word overwrote the record (found
    /// by the simulation). The file's word costs one frame read: from the mapping where appends go
    /// through one (no system call), else one `pread`.
    @inline(__always)
    func holdsEveryRecord(_ state: EngineState) -> Bool {
        state.isCurrent && state.log.confirmsNothingPastEnd(io: io)
    }

    /// Brings the state up to date with what other processes committed, under the file lock, where
    /// the page is consistent and no one appends. A page whose length is behind what this state
    /// read (records that verified past it: a page put back from a copy) is caught up from the
    /// state's end, like any other.
    ///
    /// - Returns: `false` when the file was replaced or does not read as published: the caller
    ///   releases the lock and reads it again with ``catchUpOrReload(_:)``. (Reloading and repairs
    ///   never run under the lock.)
    func catchUpUnderLock(_ state: inout EngineState) throws(TinyStorageError) -> Bool {
        guard let coordination = state.coordination.file, let file = state.log.dataFile else { return false }
        let published = coordination.published
        guard coordination.isInitialized, published.generation == state.log.generation,
            try applyTail(of: file, upTo: published.length, to: &state, underLock: true)
        else { return false }
        state.coordination.seenSequence = coordination.sequence
        return true
    }

    /// Brings the state up to date without the file lock: reads the new records, or the replaced
    /// file whole, and repairs the file if what was committed does not verify.
    func catchUpOrReload(_ state: inout EngineState) throws(TinyStorageError) {
        if catchUpWithoutFileLock(&state) { return }
        defer { noteProtectionRemovals(&state) }
        try load(&state)
    }

    /// Catches up without the file lock when that is possible: published bytes are never changed
    /// in place, so they can be read while another process appends after them, and a replaced
    /// file is read whole. Returns `false` when the caller must read the whole file.
    ///
    /// NB: a page whose length is behind this state's end is no reason to read the whole file:
    /// this state read a record another process appended and had not published yet (a look
    /// between its append and its publish, which vnode events make common), and a whole read
    /// would announce what follows as one change, without its write IDs.
    func catchUpWithoutFileLock(_ state: inout EngineState) -> Bool {
        guard let coordination = state.coordination.file, let file = state.log.dataFile else { return false }
        let sequence = coordination.sequence  // NB: read first, so later commits are not marked seen
        guard let published = coordination.consistentPublished, published.generation == state.log.generation,
            (try? applyTail(of: file, upTo: published.length, to: &state, underLock: false)) == true
        else { return false }
        state.coordination.seenSequence = sequence
        return true
    }

    /// Reads and applies the records from `state.log.end` on. Those up to `length` (the page's
    /// published length) must verify; and the log goes on past `length` for as long as records
    /// verify and continue the sequence, so a page behind the file hides none of them and the
    /// next append lands after them.
    ///
    /// NB: the usual case costs what it did before the look past `length`: one `pread`, of one
    /// frame more than what is new. A record found there is read whole and checked, one `pread`
    /// each.
    ///
    /// - Parameter underLock: Whether the commit lock is held: then no one is appending, and
    ///   anything but zeros after the last record that verifies is the remains of an append that
    ///   died, noted to be cut before the next one (``LogState/deadTailEnd``). Without the
    ///   lock it may be an append under way, and is left alone.
    /// - Returns: `false` when the bytes up to `length` do not verify as whole records.
    private func applyTail(
        of file: DataFile, upTo length: Int, to state: inout EngineState, underLock: Bool
    ) throws(TinyStorageError) -> Bool {
        var commits: [LogCommit] = []
        var end = state.log.end
        var sequence = state.log.sequence
        var wanted = max(length - end, 0) + LogFormat.frameSize
        // NB: the page's length is a hint: more than a little is read only as far as the file goes,
        // and not at all when the file's size cannot be read (a page written over claimed more
        // than any memory holds: a failed `fstat` must not let that through to the allocation).
        if wanted > 1 << 16 {
            switch io.status(file.fd) {
            case .success(let status): wanted = min(wanted, max(status.size - end, 0) + LogFormat.frameSize)
            case .failure(let error): throw unavailable(.system(error, "read", path: location.dataPath))
            }
        }
        var stop = LogScanner.Stop.end
        while true {
            let tail: [UInt8]
            switch io.read(file.fd, count: wanted, at: end) {
            case .success(let bytes): tail = bytes
            case .failure(let error): throw unavailable(.system(error, "read", path: location.dataPath))
            }
            let scanned = tail.withUnsafeBytes {
                LogScanner.scan(
                    $0, from: 0, version: state.log.formatVersion,
                    sequencedAfter: state.log.formatVersion >= 2 ? sequence : nil
                ) { commit in
                    sequence = commit.sequence
                    commits.append(commit)
                }
            }
            end += scanned.end
            stop = scanned.stop
            // NB: a record that reaches past what was read, with more to read: read it whole,
            // and the frame after it.
            guard case .incomplete(let offset) = scanned.stop, tail.count == wanted, offset + 4 <= tail.count else {
                break
            }
            guard
                let recordLength = LogFormat.length(
                    tail.withUnsafeBytes { $0.loadLittleEndian(UInt32.self, at: offset) }),
                recordLength <= LogFormat.maximumPayloadSize
            else { break }
            wanted = 2 * LogFormat.frameSize + recordLength
            // NB: a length that is not a record's (damage) is not read into memory past the file.
            if wanted > 1 << 16, case .success(let status) = io.status(file.fd), end + wanted > status.size {
                break
            }
        }
        guard end >= length else { return false }
        for commit in commits {
            if let change = apply(commit, to: &state, isExternal: true) { enqueueChange(change, in: &state) }
        }
        state.log.readRecords(through: end)
        if underLock, stop != .end { state.log.mayHaveDeadTail = true }
        return true
    }
}
