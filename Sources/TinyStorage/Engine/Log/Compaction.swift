import Foundation

extension Engine {
    /// Whether the log has grown enough past its live data to be worth rewriting.
    static func shouldCompact(end: Int, liveBytes: Int) -> Bool {
        end >= minimumCompactionSize && end >= compactionRatio * liveBytes
    }

    /// Has the log compacted after a commit that left it worth compacting: on a background
    /// queue, one compaction at a time, unless ``Options/compactsInBackground`` is off.
    ///
    /// NB: a compaction rewrites the live entries and flushes the new file before it renames it
    /// into place: several milliseconds for a store of a few hundred kilobytes, which the commit
    /// that happened to cross the threshold (often on the main thread) used to wait for. It needs
    /// nothing from that commit: it already runs beside other commits, of this process and of
    /// others, holding the locks only to take its snapshot and to swap the files.
    ///
    /// A log that reaches twice ``minimumCompactionSize`` all the same (commits outpacing the
    /// background compaction) is compacted before the commit returns, waiting for the one under
    /// way first: a store's file never grows much past that, however fast it is written.
    func scheduleCompaction(end: Int) {
        guard options.compactsInBackground else {
            compactIfNeeded()
            return
        }
        if end >= 2 * Self.minimumCompactionSize {
            // NB: on the queue, after whatever compaction it holds (the check is made again there);
            // inline when already on it (a logger that writes to a store, called by a compaction).
            if DispatchQueue.getSpecific(key: Self.compactionQueueKey) != nil {
                compactIfNeeded()
            } else {
                Self.compactionQueue.sync { _ = compactIfNeeded() }
            }
            return
        }
        let isFirst = compactionScheduled.withLock { scheduled in
            defer { scheduled = true }
            return !scheduled
        }
        guard isFirst else { return }
        Self.compactionQueue.async { [weak self] in
            guard let self else { return }
            let succeeded = compactIfNeeded()
            // NB: cleared once done: commits meanwhile (each still over the threshold until the
            // swap) scheduled nothing. The file they leave (the snapshot, then every commit made
            // during the rewrite) may call for another compaction already: scheduled now, not
            // at the next commit, which may never come. Not after a failure: that would retry
            // in a loop (a commit tries again once the log has grown by
            // `compactionRequestInterval`).
            compactionScheduled.withLock { $0 = false }
            guard succeeded else { return }
            let end = withState { state in
                !state.inMemory && Self.shouldCompact(end: state.log.end, liveBytes: state.index.liveBytes)
                    ? state.log.end : nil
            }
            if let end { scheduleCompaction(end: end) }
        }
    }

    /// Where background compactions run, one at a time, whichever store they are for.
    static let compactionQueue: DispatchQueue = {
        let queue = DispatchQueue(label: "TinyStorage.compaction", qos: .utility)
        queue.setSpecific(key: compactionQueueKey, value: ())
        return queue
    }()
    /// Set on ``compactionQueue``, so code can tell it runs there.
    static let compactionQueueKey = DispatchSpecificKey<Void>()

    /// Returns once every background compaction scheduled so far has finished (for tests).
    static func waitForBackgroundCompactions() {
        compactionQueue.sync {}
    }

    /// Compacts when ``shouldCompact(end:liveBytes:)`` says so. Failures are logged, never thrown:
    /// the commit that triggered compaction has already succeeded.
    ///
    /// - Returns: whether it did not fail (it may have found nothing to do).
    @discardableResult
    func compactIfNeeded() -> Bool {
        do throws(TinyStorageError) {
            try compact(force: false)
            return true
        } catch {
            logger.log(.warning, "Compaction failed; the store keeps working on its current file. \(error)")
            return false
        }
    }

    /// Compacts now, whatever the log's size: opens or catches up first.
    ///
    /// - Parameter version: The format version the new file must have at least (3 before a value
    ///   that expires is put into a version 2 file); `nil`, the file's own (2 for a version 1 file).
    func compactNow(upgradingTo version: UInt32? = nil) throws(TinyStorageError) {
        if options.readOnly { throw readOnlyRefusal }
        try compact(force: true, version: version)
    }

    /// Rewrites the live entries into a new file and puts it in place of the old one, holding the
    /// cross-process lock only for the swap.
    ///
    /// 1. Under the engine's lock, take a snapshot of the entries.
    /// 2. With no lock: write the new file under a name no one can predict, flush it, read it
    ///    back and verify it.
    /// 3. With no lock: copy the records committed since the snapshot to the new file, numbered
    ///    on after its own (published records never change), a few passes while more arrive.
    /// 4. Under both locks: catch up; if another process replaced the file meanwhile, give up
    ///    (it compacted or repaired). Otherwise copy what was committed since the last pass
    ///    (usually nothing), rename the new file over the old one and publish the new
    ///    generation, so other processes read it next. The lock is held for that much only.
    /// 5. With no lock: flush what steps 3 and 4 copied and the directory, so the rename is durable.
    ///
    /// A crash at any step leaves either the old file or the complete new one in place.
    ///
    /// Values whose deadline has passed (by this process's clock, when the snapshot is taken) are
    /// left out of the new file, and dropped from this instance's entries when it is put in place
    /// (announced first if their expiry was not yet: see ``announceExpiries(_:)``). The new file
    /// keeps the old one's version, or `version` when later (never below 2): the records copied
    /// from the old file's tail are copied as they are.
    private func compact(force: Bool, version: UInt32? = nil) throws(TinyStorageError) {
        let snapshot = try withState { (state) throws(TinyStorageError) -> CompactionSnapshot? in
            if state.inMemory { return nil }  // nothing on disk to compact
            try ensureOpen(&state)
            if !state.isCurrent { try bringUpToDate(&state) }
            guard force || Self.shouldCompact(end: state.log.end, liveBytes: state.index.liveBytes),
                let folder = state.log.folder
            else { return nil }
            guard let file = state.log.dataFile, let coordination = state.coordination.file else { return nil }
            return CompactionSnapshot(
                entries: state.index.entries, generation: state.log.generation, end: state.log.end, folder: folder,
                logSequence: state.log.sequence, formatVersion: state.log.formatVersion, file: file,
                coordination: coordination)
        }
        guard let snapshot else { return }
        let generation = snapshot.generation + 1
        let folder = snapshot.folder
        let compacted = Self.compactedFile(
            generation: generation, baseSequence: snapshot.logSequence, entries: snapshot.entries,
            version: max(snapshot.formatVersion, version ?? 0), now: now)
        let newVersion = compacted.bytes.withUnsafeBytes { $0.loadLittleEndian(UInt32.self, at: 8) }
        let written = try writeVerifiedFile(in: folder, bytes: compacted.bytes, noting: snapshot.coordination)

        // Step 3. NB: at most a few passes: a store committing faster than it can be copied is
        // finished under the lock, as before.
        var copied = (
            end: snapshot.end, size: written.size, sequence: snapshot.logSequence + UInt64(compacted.records)
        )
        do throws(TinyStorageError) {
            for _ in 0..<4 {
                let published = snapshot.coordination.published
                guard published.generation == snapshot.generation, published.length > copied.end else { break }
                copied.size += try copyRecords(
                    from: snapshot.file, copied.end..<published.length, version: snapshot.formatVersion,
                    to: written.file, at: copied.size, numberingAfter: &copied.sequence)
                copied.end = published.length
            }
        } catch {
            _ = folder.remove(written.name)
            throw error
        }

        var swapped: (coordination: CoordinationFile, size: Int, copiedTail: Bool, before: Int)?
        do throws(TinyStorageError) {
            swapped = try withState { (state) throws(TinyStorageError) in
                // NB: caught up before the file lock, as a commit does: under it, only what raced in.
                if !state.isCurrent { try bringUpToDate(&state) }
                return try withFileLock(&state) { (state) throws(TinyStorageError) in
                    if !holdsEveryRecord(state), try !catchUpUnderLock(&state) { return nil }
                    guard state.log.generation == snapshot.generation, state.log.end >= copied.end,
                        let old = state.log.dataFile, let coordination = state.coordination.file
                    else { return nil }
                    var size = copied.size
                    var sequence = copied.sequence
                    if state.log.end > copied.end {
                        size += try copyRecords(
                            from: old, copied.end..<state.log.end, version: snapshot.formatVersion, to: written.file,
                            at: size, numberingAfter: &sequence)
                    }
                    if case .failure(let error) = folder.rename(written.name, to: StoreLocation.dataFileName) {
                        throw .system(error, "replace the data file with", path: folder.path(of: written.name))
                    }
                    let before = state.log.end
                    state.log.dataFile = written.file
                    state.log.generation = generation
                    state.log.formatVersion = newVersion
                    dropExpired(compacted.expired, from: &state)
                    state.log.sequence = sequence
                    state.log.readRecords(through: size)
                    state.log.nextCompactionRequest = 0
                    state.coordination.seenSequence = coordination.publish(generation: generation, length: size)
                    return (coordination, size, size > written.size, before)
                }
            }
        } catch {
            _ = folder.remove(written.name)
            throw error
        }
        guard let swapped else {
            _ = folder.remove(written.name)  // another process replaced the file first
            return
        }
        swapped.coordination.signalChange()
        let tailFlush = Result { () throws(Errno) in
            if swapped.copiedTail { try written.file.sync(through: swapped.size) }
        }
        if case .failure(let error) = tailFlush {
            logger.log(.warning, "Could not flush the compacted file's last records: \(error).")
        } else {
            if swapped.copiedTail {
                written.file.recordDurableMark(through: swapped.size, flushesLater: options.backgroundFlushes)
            }
        }
        if case .failure(let error) = folder.sync() {
            // The new file is in place and complete; only the rename's durability is in doubt.
            logger.log(.warning, "Could not sync the store directory after replacing its file: \(error).")
        } else if let inode = written.file.inode {
            swapped.coordination.recordNameDurable(ofFileWithInode: inode)
        }
        logger.log(.debug, "Compacted \(location.dataPath) from \(swapped.before) to \(swapped.size) bytes.")
    }

    /// Copies the records in `range` of `source` (a file of format `version`) to `destination` at
    /// `offset`, in the current format, numbered after `sequence` (which ends as the last one), and
    /// returns how many bytes that was: commits made since a compaction's snapshot. Without the
    /// file lock, only up to what is published (those bytes never change).
    private func copyRecords(
        from source: DataFile, _ range: Range<Int>, version: UInt32, to destination: DataFile, at offset: Int,
        numberingAfter sequence: inout UInt64
    ) throws(TinyStorageError) -> Int {
        let bytes: [UInt8]
        switch io.read(source.fd, count: range.count, at: range.lowerBound) {
        case .success(let value): bytes = value
        case .failure(let error): throw .system(error, "read", path: location.dataPath)
        }
        guard bytes.count == range.count else {
            throw TinyStorageError(.io, "The data file '\(location.dataPath)' is shorter than what was committed.")
        }
        // NB: renumbered, not copied as they are: the compacted records took the numbers after
        // the snapshot. A version 1 tail is encoded again (it must not land in a version 2 file);
        // a version 2 one is a valid version 3 tail as it is.
        let records: [UInt8]?
        if version >= LogFormat.version {
            records = bytes.withUnsafeBytes { LogScanner.renumberedCopy(of: $0, version: version, after: &sequence) }
        } else {
            var encoded: [UInt8] = []
            let scanned = bytes.withUnsafeBytes { raw in
                LogScanner.scan(raw, from: 0, version: version) { commit in
                    var commit = commit
                    sequence += 1
                    commit.sequence = sequence
                    commit.encode(into: &encoded)
                }
            }
            records = scanned.stop == .end ? encoded : nil
        }
        guard let records else {
            throw TinyStorageError(
                .io, "The records committed during compaction did not verify; the old file was kept.")
        }
        if case .failure(let error) = records.withUnsafeBytes({ io.write(destination.fd, $0, at: offset) }) {
            throw .system(error, "write the new file", path: location.dataPath)
        }
        return records.count
    }
}

extension Engine {
    /// Drops from the entries the values a compaction or repair left out of its file because
    /// they had expired, unless rewritten since (`version`), announcing first what expired
    /// unannounced. Under the engine's lock.
    func dropExpired(_ expired: [(key: String, version: UInt64)], from state: inout EngineState) {
        guard !expired.isEmpty else { return }
        announceExpiries(&state)
        for (key, version) in expired {
            guard let entry = state.index.entries[key], entry.version == version else { continue }
            state.index.entries.removeValue(forKey: key)
            state.index.liveBytes -= IndexState.recordSize(key, entry)
        }
    }
}

/// What a compaction rewrites, taken under the engine's lock.
private struct CompactionSnapshot {
    var entries: EntryIndex
    var generation: UInt64
    var end: Int
    var folder: StoreFolder
    /// The last record's sequence number, and the format of the file being rewritten.
    var logSequence: UInt64
    var formatVersion: UInt32
    /// The file being rewritten and its shared page, to copy what is committed meanwhile.
    var file: DataFile
    var coordination: CoordinationFile
}
