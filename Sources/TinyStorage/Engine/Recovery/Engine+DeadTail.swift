import Foundation

// What a dead writer left past the log's end: found by a read (``LogState/deadTailEnd``), cut
// only under the commit lock (where no append can be under way), flushed before anything is
// appended after it, and copied to `quarantine/` once every lock is released
// (``RecoveryState/deadTail``).

extension Engine {
    /// Cuts off what lies past the log's end: the remains of an append whose process died before
    /// publishing it, or of a disk that lost part of its cache (never a commit anyone was told
    /// about, nor a record that verifies: those are read first). Call under the file lock, where
    /// no other process is appending; the bytes are set aside in `deadTail` for
    /// ``setAsideDeadTail(_:)`` to copy once the lock is released.
    func cutDeadTail(_ state: inout EngineState) throws(TinyStorageError) {
        // NB: against what is committed now, not what this state had seen: an append another
        // process published since (perhaps the very bytes seen) is a commit, and is kept.
        if !holdsEveryRecord(state), try !catchUpUnderLock(&state) {
            state.log.mayHaveDeadTail = false  // the file was replaced; its successor is checked when read
            return
        }
        guard state.log.mayHaveDeadTail, let file = state.log.dataFile, let coordination = state.coordination.file
        else { return }
        let end = state.log.end
        let size: Int
        switch io.status(file.fd) {
        case .success(let status): size = status.size
        case .failure(let error): throw .system(error, "inspect", path: location.dataPath)
        }
        let through = min(size, state.log.deadTailEnd)
        guard through > end else {
            state.log.mayHaveDeadTail = false
            return
        }
        let bytes: [UInt8]
        switch io.read(file.fd, count: through - end, at: end) {
        case .success(let value): bytes = value
        case .failure(let error): throw .system(error, "read", path: location.dataPath)
        }
        if case .failure(let error) = cutOff(from: 0, in: file, holding: bytes, coordination, at: end) {
            throw .system(error, "cut the interrupted write off", path: location.dataPath)
        }
        state.log.mayHaveDeadTail = false
        // NB: zeros are space allocated ahead (see AppendMapping) or by an earlier version, not a write.
        if bytes.withUnsafeBytes({ Self.endOfNonZeroBytes(in: $0, from: 0) }) > 0 {
            state.recovery.deadTail = (end, bytes)
        }
    }

    /// Removes what lies from `offset` of `bytes` (the file's bytes from `base` on) to the end of
    /// `file`, the remains of a write that was not committed. Where commits append through a
    /// mapping (see ``appendsThroughMapping(_:_:)``) the file is never made shorter, since another
    /// process may have it mapped: the non-zero bytes are overwritten with zeros, which read as
    /// the end of the log. Elsewhere it is cut. Call under the file lock.
    ///
    /// The cut is not flushed here (no flush under the lock: an app suspended holding it in a
    /// shared container is killed), but it reaches stable storage before anything is appended
    /// after it: it is noted in the lock page, and ``withFileLock(_:appending:_:)`` flushes it
    /// once the lock is let go, and before any process appends under it again. Until then, a
    /// power loss can bring the bytes back under later appends, and a later append sharing a
    /// sector's bytes with a dead record can make it whole again (the crash simulator found this
    /// with values of repeated characters).
    func cutOff(
        from offset: Int, in file: DataFile, holding bytes: [UInt8], _ coordination: CoordinationFile, at base: Int = 0
    ) -> Result<Void, Errno> {
        let fd = file.fd
        let cut: Result<Void, Errno>
        if appendsThroughMapping(file, coordination) {
            var last = bytes.count
            while last > offset, bytes[last - 1] == 0 { last -= 1 }
            guard last > offset else { return .success(()) }
            let zeros = [UInt8](repeating: 0, count: last - offset)
            cut = zeros.withUnsafeBytes { io.write(fd, $0, at: base + offset) }
        } else {
            cut = io.truncate(fd, to: base + offset)
        }
        // NB: noted even when it failed: part of it may have been done.
        coordination.noteCut()
        return cut
    }

    /// Flushes the data file, with no lock held, so that every cut of its end noted in the lock
    /// page (see ``cutOff(from:in:holding:_:at:)``) is on stable storage before anything is
    /// appended after it. The file is opened by its name: the cut one is the current one, which
    /// this process may not have caught up with yet.
    @inline(never)
    func flushCuts(_ cuts: UInt64, in folder: StoreFolder, _ coordination: CoordinationFile) throws(TinyStorageError) {
        guard let fd = try folder.openFile(StoreLocation.dataFileName, writable: false, creation: .never) else {
            coordination.recordCutsFlushed(cuts)  // removed: nothing is appended after its cut
            return
        }
        defer { io.close(fd) }
        if case .failure(let error) = io.syncWhereSupported(fd, dataOnly: true) {
            throw .system(error, "flush a cut of", path: location.dataPath)
        }
        coordination.recordCutsFlushed(cuts)
    }

    /// Copies the bytes ``cutDeadTail(_:)`` cut off to `quarantine/` and reports them. Call
    /// without the file lock. Best effort: those bytes were never committed.
    func setAsideDeadTail(_ state: inout EngineState) {
        guard let pending = state.recovery.deadTail, let folder = state.log.folder else { return }
        state.recovery.deadTail = nil
        var last = pending.bytes.count
        while last > 0, pending.bytes[last - 1] == 0 { last -= 1 }
        do throws(TinyStorageError) {
            let url = try quarantine(pending.bytes[..<last], label: "interrupted-write", in: folder)
            let report = TinyStorage.RecoveryReport(
                date: Date(),
                error: TinyStorageError(
                    .corrupted, "The last record of '\(location.dataPath)' was incomplete: a write was interrupted."),
                damagedRanges: [pending.offset..<pending.offset + last], recoveredRecordCount: 0,
                possiblyAffectedKeys: pending.bytes.withUnsafeBytes {
                    LogScanner.probableKeys(in: $0, range: 0..<pending.bytes.count)
                },
                quarantineURL: url, isInterruptedWrite: true)
            state.recovery.reports.append(report)
            state.note(report.description, level: .info)
        } catch {
            state.note("Could not set aside the remains of an interrupted write: \(error)", level: .warning)
        }
    }
}
