import Foundation

extension Engine {
    /// Whether the log has grown enough past its live data to be worth rewriting.
    static func shouldCompact(end: Int, liveBytes: Int) -> Bool {
        end >= minimumCompactionSize && end >= compactionRatio * liveBytes
    }

    /// Compacts when ``shouldCompact(end:liveBytes:)`` says so. Failures are logged, never thrown:
    /// the commit that triggered compaction has already succeeded.
    func compactIfNeeded() {
        do throws(TinyStorageError) {
            try compact(force: false)
        } catch {
            logger.log(.warning, "Compaction failed; the store keeps working on its current file. \(error)")
        }
    }

    /// Compacts now, whatever the log's size: opens or catches up first.
    func compactNow() throws(TinyStorageError) {
        try compact(force: true)
    }

    /// Rewrites the live entries into a new file and puts it in place of the old one, holding the
    /// cross-process lock only for the swap.
    ///
    /// 1. Under the engine's lock, take a snapshot of the entries.
    /// 2. With no lock: write the new file under a name no one can predict, flush it, read it
    ///    back and verify it.
    /// 3. Under both locks: catch up; if another process replaced the file meanwhile, give up
    ///    (it compacted or repaired). Otherwise copy the records committed since the snapshot
    ///    (usually none) to the new file, numbered on after its own, rename it over the old one
    ///    and publish the new generation, so other processes read it next.
    /// 4. With no lock: flush what step 3 copied and the directory, so the rename is durable.
    ///
    /// A crash at any step leaves either the old file or the complete new one in place.
    private func compact(force: Bool) throws(TinyStorageError) {
        let snapshot = try withState { (state) throws(TinyStorageError) -> CompactionSnapshot? in
            if state.inMemory { return nil }  // nothing on disk to compact
            try ensureOpen(&state)
            if !state.isCurrent { try bringUpToDate(&state) }
            guard force || Self.shouldCompact(end: state.end, liveBytes: state.liveBytes),
                let folder = state.folder
            else { return nil }
            return CompactionSnapshot(
                entries: state.entries, generation: state.generation, end: state.end, folder: folder,
                logSequence: state.logSequence, formatVersion: state.formatVersion)
        }
        guard let snapshot else { return }
        let generation = snapshot.generation + 1
        let folder = snapshot.folder
        let written = try writeVerifiedFile(
            in: folder,
            bytes: Self.fileBytes(
                generation: generation, baseSequence: snapshot.logSequence, entries: snapshot.entries))

        var swapped: (coordination: CoordinationFile, size: Int, copiedTail: Bool, before: Int)?
        do throws(TinyStorageError) {
            swapped = try withState { (state) throws(TinyStorageError) in
                try withFileLock(&state) { (state) throws(TinyStorageError) in
                    if !state.isCurrent, try !catchUpUnderLock(&state) { return nil }
                    guard state.generation == snapshot.generation, state.end >= snapshot.end,
                        let old = state.dataFile, let coordination = state.coordination
                    else { return nil }
                    var size = written.size
                    var sequence = snapshot.logSequence + UInt64(snapshot.entries.count)
                    if state.end > snapshot.end {
                        size += try copyRecords(
                            from: old, snapshot.end..<state.end, version: snapshot.formatVersion, to: written.file,
                            at: size, numberingAfter: &sequence)
                    }
                    if case .failure(let error) = folder.rename(written.name, to: StoreLocation.dataFileName) {
                        throw .system(error, "replace the data file with", path: folder.path(of: written.name))
                    }
                    let before = state.end
                    state.dataFile = written.file
                    state.generation = generation
                    state.formatVersion = LogFormat.version
                    state.logSequence = sequence
                    state.end = size
                    state.seenSequence = coordination.publish(generation: generation, length: size)
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
            swapped.coordination.recordDurable(generation: generation, length: swapped.size)
            if swapped.copiedTail {
                written.file.recordDurableMark(through: swapped.size, flushesLater: options.backgroundFlushes)
            }
        }
        if case .failure(let error) = folder.sync() {
            // The new file is in place and complete; only the rename's durability is in doubt.
            logger.log(.warning, "Could not sync the store directory after replacing its file: \(error).")
        } else {
            swapped.coordination.recordNameDurable(generation: generation)
        }
        logger.log(.debug, "Compacted \(location.dataPath) from \(swapped.before) to \(swapped.size) bytes.")
    }

    /// Copies the records in `range` of `source` (a file of format `version`) to `destination` at
    /// `offset`, in the current format, numbered after `sequence` (which ends as the last one), and
    /// returns how many bytes that was. Call under the file lock: these are commits made since a
    /// compaction's snapshot, usually a few bytes.
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
        // NB: re-encoded, not copied: the compacted records took the numbers after the snapshot,
        // and a version 1 tail must not land in a version 2 file.
        var records: [UInt8] = []
        let scanned = bytes.withUnsafeBytes { raw in
            LogScanner.scan(raw, from: 0, version: version) { commit in
                var commit = commit
                sequence += 1
                commit.sequence = sequence
                commit.encode(into: &records)
            }
        }
        guard scanned.stop == .end else {
            throw TinyStorageError(
                .io, "The records committed during compaction did not verify; the old file was kept.")
        }
        if case .failure(let error) = records.withUnsafeBytes({ io.write(destination.fd, $0, at: offset) }) {
            throw .system(error, "write the new file", path: location.dataPath)
        }
        return records.count
    }
}

/// What a compaction rewrites, taken under the engine's lock.
private struct CompactionSnapshot {
    var entries: [String: CachedEntry]
    var generation: UInt64
    var end: Int
    var folder: StoreFolder
    /// The last record's sequence number, and the format of the file being rewritten.
    var logSequence: UInt64
    var formatVersion: UInt32
}
