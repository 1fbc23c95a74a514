import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension Engine {
    /// What ``repair(_:)`` decided after reading a data file from its start.
    private enum Repair {
        /// Every record verifies: only the lock page needs the file's generation and length.
        case none
        /// The last record is incomplete (a write interrupted by a crash): cut the file there.
        case cut(at: Int)
        /// Damage followed by records that verify, or damage (or a missing end) below what was
        /// known to be durable: rebuild the file from every verified record.
        case salvage(header: LogHeader?, isDataLoss: Bool)
    }

    /// Checks the data file from its start and puts right what a crash or damage left, taking
    /// the cross-process lock only to put the result in place.
    ///
    /// Without the lock: read the whole file, decide, copy damaged bytes to `quarantine/` and
    /// write a rebuilt file (flushed and verified). Under the lock: check that the file is still
    /// the one that was read (same inode, same size) — else another process got there first, and
    /// everything starts over — then cut the interrupted write or rename the rebuilt file into
    /// place, and publish. A file with nothing of ours in it, or written by a newer version, is
    /// never changed: the store stays unavailable.
    func repair(_ state: inout EngineState) throws(TinyStorageError) {
        if options.readOnly { throw needsWriter("its data file needs a check and repair") }
        for _ in 0..<8 {
            if try repairOnce(&state) { return }
        }
        throw TinyStorageError(
            .io, "The data file '\(location.dataPath)' kept changing while it was being checked; try again.")
    }

    /// One attempt of ``repair(_:)``. Returns `false` when the file changed meanwhile.
    private func repairOnce(_ state: inout EngineState) throws(TinyStorageError) -> Bool {
        guard let coordination = state.coordination.file else {
            throw TinyStorageError(.unavailable, "The store is not open.")
        }
        let folder = try openFolder()
        state.log.folder = folder
        guard let fd = try folder.openFile(StoreLocation.dataFileName, writable: true, creation: .never) else {
            try createDataFile(&state)
            return false
        }
        let file = DataFile(fd: fd, io: io, scheduler: options.flushScheduler)
        // NB: read before the file: a publish since then (another process's repair, and commits
        // after it) means the bytes read may be stale. Where commits write into space allocated
        // ahead, the file's size does not tell (see AppendMapping).
        let sequenceAtRead = coordination.sequence
        let identity: FileStatus
        switch io.status(fd) {
        case .success(let status): identity = status
        case .failure(let error): throw .system(error, "inspect", path: location.dataPath)
        }
        if identity.size == 0 {
            try replaceEmptyFile(identity, &state)
            return false
        }
        let buffer: Data
        switch io.readData(fd, count: identity.size, at: 0) {
        case .success(let value): buffer = value
        case .failure(let error): throw .system(error, "read", path: location.dataPath)
        }
        let bytes = [UInt8](buffer)

        // Decide, and prepare everything slow, without the lock.
        var fresh = emptyState(like: state, expectedSize: buffer.count)
        fresh.log.folder = folder
        let repair: Repair
        var end = 0
        var generation: UInt64 = 0
        switch buffer.withUnsafeBytes({ LogHeader.decode($0) }) {
        case .failure(.newerVersion(let version)):
            throw Self.newerFormat(version, path: location.dataPath)
        case .failure(let problem):
            // A file whose header fails is salvaged only when records inside it verify: a file
            // with nothing of ours in it (another program's, or garbage) is never replaced.
            let recoverable = bytes.withUnsafeBytes {
                LogScanner.nextVerifiableRecord(
                    in: $0, after: min(LogFormat.minimumHeaderSize, $0.count) - 1, version: nil)
                    != nil
            }
            guard recoverable else { throw unrecognizedFile(problem) }
            repair = .salvage(header: nil, isDataLoss: false)
        case .success(let header):
            generation = header.generation
            fresh.log.formatVersion = header.version
            fresh.log.sequence = header.baseSequence
            fresh.log.baseSequence = header.baseSequence
            fresh.log.snapshotRecords = header.snapshotRecords
            let scanned = bytes.withUnsafeBytes { raw in
                LogScanner.scan(
                    raw, from: header.size, version: header.version,
                    sequencedAfter: header.version >= 2 ? header.baseSequence : nil
                ) { commit in
                    apply(commit, to: &fresh, isExternal: true, collectChanges: false)
                }
            }
            end = scanned.end
            if header.version >= 2 {
                // NB: below `known`, every byte had reached stable storage (the durable mark, which
                // flushes advance, in the file's own header): losing any of it is data loss, never
                // a crash. Past it, damage is the power-loss window (or a disk that lost its cache
                // without a restart): the file is cut at the first damage or gap in the sequence,
                // and nothing after it is applied, so what survives is a prefix. What the lock
                // page says was committed is a hint, not evidence: a page newer than the file (a
                // store folder restored from copies taken at different moments, or the page of a
                // disk that lost data it never flushed) must not make the loss of unflushed commits
                // look like damage, nor keep records after a gap.
                let known = buffer.withUnsafeBytes { LogHeader.durableMark(in: $0) }
                let published = coordination.published
                if coordination.isInitialized, published.generation == header.generation,
                    published.length > scanned.end
                {
                    fresh.note(
                        "store.lock said '\(location.dataPath)' held \(published.length) bytes of commits, but its "
                            + "records end at \(scanned.end): the file was put back from an older copy, another "
                            + "program cut it short, or the disk lost writes it had not flushed yet. Every record "
                            + "that verifies was read; what the file lacks cannot be recovered from it.",
                        level: .warning)
                }
                if let offset = scanned.stop.offset {
                    repair = offset >= known ? .cut(at: offset) : .salvage(header: header, isDataLoss: true)
                } else if scanned.end < known {
                    repair = .salvage(header: header, isDataLoss: true)  // cut short below what was durable
                } else {
                    repair = .none
                }
            } else if let offset = scanned.stop.offset {
                // NB: a version 1 file has no durable mark. Damage with no verifiable record after
                // it is the last write, interrupted; damage followed by a record that verifies is
                // corruption: cutting there would drop good records.
                let isInterruptedWrite = bytes.withUnsafeBytes {
                    LogScanner.nextVerifiableRecord(in: $0, after: offset, version: header.version) == nil
                }
                repair = isInterruptedWrite ? .cut(at: offset) : .salvage(header: header, isDataLoss: false)
            } else {
                repair = .none
            }
        }

        var replacement: (name: String, file: DataFile, size: Int)?
        var report: TinyStorage.RecoveryReport?
        switch repair {
        case .none:
            break
        case .cut(let offset):
            var last = bytes.count
            while last > offset, bytes[last - 1] == 0 { last -= 1 }
            let quarantined = try quarantine(bytes[offset..<max(last, offset)], label: "interrupted-write", in: folder)
            var setAside = 0
            var keys = bytes.withUnsafeBytes { LogScanner.probableKeys(in: $0, range: offset..<bytes.count) }
            bytes.withUnsafeBytes { raw in
                _ = LogScanner.salvage(raw, from: offset, version: fresh.log.formatVersion) { commit in
                    setAside += 1
                    keys += commit.operations.map(\.key)
                }
            }
            report = TinyStorage.RecoveryReport(
                date: Date(),
                error: TinyStorageError(
                    .corrupted,
                    setAside == 0
                        ? "The last record of '\(location.dataPath)' was incomplete: a write was interrupted."
                        : "The end of '\(location.dataPath)', past what was known to be on stable storage, had a "
                            + "record missing or damaged (a power loss): the \(setAside) record(s) after it were set "
                            + "aside, so the store holds every commit up to the damage and none after it."),
                damagedRanges: [offset..<max(last, offset + 1)], recoveredRecordCount: 0,
                possiblyAffectedKeys: Array(Set(keys)).sorted(), quarantineURL: quarantined, isInterruptedWrite: true,
                setAsideRecordCount: setAside)
        case .salvage(let header, let isDataLoss):
            fresh = emptyState(like: state, expectedSize: buffer.count)
            fresh.log.folder = folder
            var recovered = 0
            var damaged: [Range<Int>] = []
            var keys: [String] = []
            fresh.log.sequence = header?.baseSequence ?? 0
            bytes.withUnsafeBytes { raw in
                let start = header?.size ?? min(LogFormat.minimumHeaderSize, raw.count)
                damaged = LogScanner.salvage(raw, from: start, version: header?.version) { commit in
                    recovered += 1
                    apply(commit, to: &fresh, isExternal: true, collectChanges: false)
                }
                // NB: without a header, records are searched for from the smallest header size on;
                // the unreadable header and any damage right after it are one range.
                if header == nil {
                    if let first = damaged.first, first.lowerBound == start {
                        damaged[0] = 0..<first.upperBound
                    } else {
                        damaged.insert(0..<start, at: 0)
                    }
                }
                for range in damaged { keys += LogScanner.probableKeys(in: raw, range: range) }
            }
            let quarantined = try quarantine(bytes[...], label: "damaged-file", in: folder)
            generation = max(header?.generation ?? 0, coordination.published.generation) + 1
            // NB: values that expired are left out, as a compaction leaves them out, and dropped
            // from the entries installed with the file, so the two agree.
            let compacted = Self.compactedFile(
                generation: generation, baseSequence: fresh.log.sequence, entries: fresh.index.entries,
                version: LogFormat.version, now: now)
            for (key, _) in compacted.expired { fresh.index.entries.removeValue(forKey: key) }
            fresh.index.liveBytes = LogFormat.headerSize
            for (key, entry) in fresh.index.entries { fresh.index.liveBytes += IndexState.recordSize(key, entry) }
            let written = try writeVerifiedFile(in: folder, bytes: compacted.bytes, noting: coordination)
            fresh.log.sequence += UInt64(compacted.records)
            fresh.log.formatVersion = compacted.bytes.withUnsafeBytes { $0.loadLittleEndian(UInt32.self, at: 8) }
            replacement = written
            end = written.size
            if isDataLoss, damaged.isEmpty {
                damaged = [end..<max(end + 1, bytes.count)]  // cut short: the missing part is what was lost
            }
            let message =
                isDataLoss
                ? "Data in '\(location.dataPath)' that was known to be on stable storage is damaged or missing (a "
                    + "failing disk, a partial copy or restore, another program writing into the file; not a crash). "
                    + "Every record that verifies was kept and the file was rebuilt; a copy of the file as it was is "
                    + "in the quarantine folder, and recoveryReports lists what may be affected."
                : "Part of '\(location.dataPath)' failed verification. Every verified record was kept and "
                    + "the file was rebuilt; a copy of the damaged file is in the quarantine folder."
            report = TinyStorage.RecoveryReport(
                date: Date(), error: TinyStorageError(.corrupted, message), damagedRanges: damaged,
                recoveredRecordCount: recovered, possiblyAffectedKeys: Array(Set(keys)).sorted(),
                quarantineURL: quarantined, isInterruptedWrite: false, isDataLoss: isDataLoss)
            if isDataLoss { fresh.recovery.pendingDataLoss = TinyStorageError(.corrupted, message) }
        }

        // Put it in place under the lock, if the file is still the one that was read.
        let applied: Bool
        do throws(TinyStorageError) {
            applied = try putRepairInPlace()
        } catch {
            if let replacement { _ = folder.remove(replacement.name) }
            throw error
        }
        func putRepairInPlace() throws(TinyStorageError) -> Bool {
            try withFileLock(&state) { (state) throws(TinyStorageError) -> Bool in
                guard case .success(let now) = io.status(in: folder.directory, StoreLocation.dataFileName),
                    now.isSameFile(as: identity), now.size == identity.size, coordination.sequence == sequenceAtRead
                else { return false }
                switch repair {
                case .none: break
                case .cut(let offset):
                    if case .failure(let error) = cutOff(from: offset, in: file, holding: bytes, coordination) {
                        throw .system(error, "cut the interrupted write off", path: location.dataPath)
                    }
                case .salvage:
                    guard let replacement else { return false }
                    if case .failure(let error) = folder.rename(replacement.name, to: StoreLocation.dataFileName) {
                        throw .system(error, "replace the damaged file with", path: folder.path(of: replacement.name))
                    }
                }
                fresh.log.generation = generation
                fresh.log.readRecords(through: end)
                fresh.log.dataFile = replacement?.file ?? file
                let published = coordination.published
                if case .none = repair, coordination.isInitialized, published == (generation, end) {
                    fresh.coordination.seenSequence = coordination.sequence  // already says so: nothing to announce
                } else {
                    fresh.coordination.seenSequence = coordination.publish(generation: generation, length: end)
                }
                return true
            }
        }
        guard applied else {
            if let replacement { _ = folder.remove(replacement.name) }
            return false
        }
        if replacement != nil {
            if case .failure(let error) = folder.sync() {
                fresh.note("Could not sync the store directory after rebuilding its file: \(error).", level: .warning)
            } else if let inode = replacement?.file.inode {
                coordination.recordNameDurable(ofFileWithInode: inode)
            }
        }
        if let report {
            fresh.recovery.reports.append(report)
            let message = report.isInterruptedWrite ? report.description : "\(report.error.description) \(report)"
            fresh.note(message, level: report.isInterruptedWrite ? .info : .error)
        }
        install(fresh, replacing: &state)
        coordination.signalChange()
        return true
    }

    /// A data file of size 0 (a crash while an earlier version created it): replaced, under the
    /// lock and only if still empty, by a new file — adopting the original TinyStorage's values
    /// when they are there.
    private func replaceEmptyFile(_ identity: FileStatus, _ state: inout EngineState) throws(TinyStorageError) {
        guard let folder = state.log.folder, let coordination = state.coordination.file else {
            throw TinyStorageError(.unavailable, "The store is not open.")
        }
        let adopted = try originalDataToAdopt(in: folder)
        let generation = max(coordination.published.generation + 1, 1)
        var bytes = LogHeader(generation: generation).encoded()
        adopted?.encode(into: &bytes)
        let written = try writeVerifiedFile(in: folder, bytes: bytes, noting: coordination)
        let replaced = try withFileLock(&state) { (_) throws(TinyStorageError) -> Bool in
            guard case .success(let now) = io.status(in: folder.directory, StoreLocation.dataFileName),
                now.isSameFile(as: identity), now.size == 0
            else { return false }
            if case .failure(let error) = folder.rename(written.name, to: StoreLocation.dataFileName) {
                throw .system(error, "create", path: location.dataPath)
            }
            return true
        }
        if !replaced { _ = folder.remove(written.name) }
        if replaced, case .failure(let error) = folder.sync() {
            state.note("Could not sync the store directory after creating its file: \(error).", level: .warning)
        }
    }

    private func unrecognizedFile(_ problem: LogHeader.Problem) -> TinyStorageError {
        let path = location.dataPath
        let what =
            problem == .damaged ? "its header fails its checksum" : "it does not start like a TinyStorage data file"
        return TinyStorageError(
            .corrupted,
            "'\(path)' cannot be read as a store: \(what) and no record in it verifies. It was left "
                + "untouched; move it away to start a new store, or run `tinystorage verify` on the directory.")
    }

    // MARK: Writing files

    /// A compacted data file: its bytes, how many records it holds, and the entries it left out.
    struct CompactedFile {
        var bytes: [UInt8]
        /// How many put records follow the header (``LogHeader/snapshotRecords``).
        var records: Int
        /// The entries whose deadline had passed, left out, with their versions.
        var expired: [(key: String, version: UInt64)]
    }

    /// The bytes of a compacted data file of format `version` (at least 2; 3 when an entry kept
    /// may expire): the header, then one put record per entry whose deadline has not passed at
    /// `now`, numbered on from `baseSequence` (the last sequence of the file it replaces).
    static func compactedFile(
        generation: UInt64, baseSequence: UInt64, entries: EntryIndex, version: UInt32, now: UInt64
    ) -> CompactedFile {
        var expired: [(key: String, version: UInt64)] = []
        var needsDeadlines = false
        for (key, entry) in entries where entry.expires {
            if entry.hasExpired(at: now) {
                expired.append((key, entry.version))
            } else {
                needsDeadlines = true
            }
        }
        let records = entries.count - expired.count
        let header = LogHeader(
            version: needsDeadlines ? max(version, LogFormat.expiringVersion) : max(version, LogFormat.version),
            generation: generation, baseSequence: baseSequence, snapshotRecords: UInt32(clamping: records))
        var bytes = header.encoded()
        var commit = LogCommit(sequence: baseSequence, operations: [])
        commit.operations.reserveCapacity(1)
        for (key, entry) in entries where !entry.hasExpired(at: now) {
            commit.sequence += 1
            commit.operations.removeAll(keepingCapacity: true)
            commit.operations.append(
                .put(key: key, value: entry.bytes.data, kind: entry.kind, deadline: entry.deadline))
            commit.encode(into: &bytes)
        }
        return CompactedFile(bytes: bytes, records: records, expired: expired)
    }

    /// Writes `bytes` to a new file under a name no one can predict, flushes it, reads it back to
    /// verify it, and returns it open. No lock is held: the caller renames it into place.
    ///
    /// `openat(O_CREAT | O_EXCL | O_NOFOLLOW)`, `pwrite(2)`, `fsync(2)`, `pread(2)` + compare.
    ///
    /// - Parameter coordination: The lock page of the store whose folder this is, told that a
    ///   temporary file is there, so that a process killed before renaming or removing it does
    ///   not leave it for long (see `CoordinationFile.noteTemporaryFile()`).
    func writeVerifiedFile(
        in folder: StoreFolder, bytes: [UInt8], noting coordination: CoordinationFile?
    ) throws(TinyStorageError) -> (
        name: String, file: DataFile, size: Int
    ) {
        // NB: flushed whole before it is put in place, so all of it is durable from then on.
        var bytes = bytes
        if bytes.count >= LogFormat.headerSize, bytes[8] >= 2 { LogHeader.setDurableMark(bytes.count, in: &bytes) }
        folder.removeAbandonedTemporaryFiles()
        // NB: noted before the file exists (a process killed right after creating it leaves the
        // note), and again after (an open that cleared the note in between did not see the file).
        coordination?.noteTemporaryFile()
        let (name, fd) = try folder.createTemporaryFile(for: StoreLocation.dataFileName)
        coordination?.noteTemporaryFile()
        let path = folder.path(of: name)
        let file = DataFile(fd: fd, io: io, syncedThrough: bytes.count, scheduler: options.flushScheduler)
        let written = bytes.withUnsafeBytes { io.write(fd, $0, at: 0) }
            .flatMap { io.syncWhereSupported(fd) }
            .flatMap { io.read(fd, count: bytes.count + 1, at: 0) }
        guard case .success(let readBack) = written, readBack == bytes else {
            _ = folder.remove(name)
            if case .failure(let error) = written { throw .system(error, "write the new file", path: path) }
            throw TinyStorageError(.io, "The new file '\(path)' did not read back as written; the old file was kept.")
        }
        return (name, file, bytes.count)
    }

    /// Copies `bytes` to `quarantine/`, flushed, and returns its URL. No lock is held.
    ///
    /// The copy is named after its contents (`<label>-<CRC-32C>-<size>.bin`) and renamed into
    /// place only when complete, without replacing: processes that find the same damage at the
    /// same time keep one copy, and a copy under that name is always whole.
    func quarantine(_ bytes: ArraySlice<UInt8>, label: String, in folder: StoreFolder) throws(TinyStorageError) -> URL {
        guard let quarantine = try folder.subfolder(StoreLocation.quarantineDirectoryName, create: true) else {
            throw TinyStorageError(.io, "The quarantine directory in '\(folder.path)' could not be created.")
        }
        let checksum = bytes.withUnsafeBytes { crc32c($0) }
        let hex = String(checksum, radix: 16)
        let name = "\(label)-\(String(repeating: "0", count: 8 - hex.count) + hex)-\(bytes.count).bin"
        let path = quarantine.path(of: name)
        if try quarantine.fileStatus(name)?.size == bytes.count { return URL(fileURLWithPath: path) }
        quarantine.removeAbandonedTemporaryFiles()
        let (temporary, fd) = try quarantine.createTemporaryFile(for: label)
        // NB: closed only once renamed: its lock says it is being written (see `createTemporaryFile`).
        defer { io.close(fd) }
        let result = bytes.withUnsafeBytes { io.write(fd, $0, at: 0) }.flatMap { io.syncWhereSupported(fd) }
        let placed = result.flatMap { quarantine.renameWithoutReplacing(temporary, to: name) }
        switch placed {
        case .success, .failure(.exists): break
        case .failure(let error):
            _ = quarantine.remove(temporary)
            throw .system(error, "save damaged bytes to", path: path)
        }
        _ = quarantine.remove(temporary)  // gone after a rename; the spare copy otherwise
        if case .failure(let error) = quarantine.sync().flatMap({ folder.sync() }) {
            throw .system(error, "save damaged bytes to", path: path)
        }
        return URL(fileURLWithPath: path)
    }
}
