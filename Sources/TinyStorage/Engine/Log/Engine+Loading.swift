import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// How a store opens and reads its data file whole: the only place the log's end is found from
// nothing (`scanCommitted`: after the last record that verifies and continues the sequence).
// Runs under the engine's lock, without the commit lock but to cut a dead tail or bring the
// page up to the file; a file that does not read as the page says is handed to `repair`.

extension Engine {
    /// Opens the store's folder and lock page, then reads the data file.
    ///
    /// A missing directory or data file is a new, empty store. Anything that exists but cannot be
    /// read makes the store unavailable: it is never treated as empty. The folder and every file
    /// lose their data protection before they are opened (see ``StoreFolder``), and one warning
    /// names what had some.
    func open(_ state: inout EngineState) throws(TinyStorageError) {
        if let nameError {
            state.recovery.failure = nameError
            throw nameError
        }
        defer { noteProtectionRemovals(&state) }
        do throws(TinyStorageError) {
            let folder = try openFolder()
            state.log.folder = folder
            if state.coordination.file == nil {
                let coordination =
                    options.readOnly
                    ? try CoordinationFile(readingIn: folder, name: StoreLocation.lockFileName)
                    : try CoordinationFile(
                        in: folder, name: StoreLocation.lockFileName,
                        sharedMutex: options.platform.commitLock == .sharedMutex)
                state.coordination.file = coordination
                mirror.attach(coordination)
            }
            try load(&state, folderJustOpened: true)
            state.recovery.failure = nil
        } catch {
            let failure = error.code == .unavailable ? error : unavailable(error)
            state.recovery.failure = failure
            throw failure
        }
    }

    /// Opens the store's folder, creating it and the directory that holds it when missing (unless
    /// the store is read-only).
    func openFolder() throws(TinyStorageError) -> StoreFolder {
        guard
            let folder = try StoreFolder.open(
                parentPath: location.parentPath, name: location.folderName, io: io, create: !options.readOnly,
                readOnly: options.readOnly, sharedReading: options.sharedReading, removals: protectionRemovals)
        else {
            if options.readOnly { throw needsWriter("its folder does not exist yet") }
            throw TinyStorageError(.io, "The store directory '\(location.directoryPath)' could not be created.")
        }
        return folder
    }

    /// Notes one warning naming every item whose data protection was removed since the last
    /// one (see ``StoreFolder``): an app that gave them a class learns that they no longer have it.
    func noteProtectionRemovals(_ state: inout EngineState) {
        let removed = protectionRemovals.withLock { removals in
            defer { removals.removeAll() }
            return removals
        }
        guard !removed.isEmpty else { return }
        state.note(
            "Removed data protection from \(removed.map(\.description).joined(separator: ", ")): a protected "
                + "file cannot be opened before the first unlock after a restart, when apps and widgets are "
                + "launched, so a store's files have none. Keep secrets in the Keychain, not in TinyStorage.",
            level: .warning)
    }

    // MARK: Reading the whole file

    /// Reads the data file into a fresh state, without the cross-process lock.
    ///
    /// The log ends where the last record that verifies, and continues the sequence, ends: the
    /// lock page's length is a hint, never the answer (see ``CoordinationFile``). So the whole
    /// file is read and checked, and the page decides only whether anything else is needed:
    /// - records that verify past the page's length are commits the page does not know of (a
    ///   store folder restored from a copy taken while it was in use, a disk that lost its cache
    ///   without the machine restarting): they are read like the others;
    /// - bytes the page says were committed that do not verify (a shorter file, or damage), or a
    ///   log ending before the durable mark in the file's own header, have the file checked and
    ///   repaired by ``repair(_:)``, as is a page not published during this boot;
    /// - anything but zeros past the log's end is cut off (and set aside) under the lock, where no
    ///   append can be under way, before anything is appended (see ``cutDeadTail(_:)``).
    ///
    /// - Parameter folderJustOpened: Whether `state.log.folder` was opened by the caller a moment ago
    ///   (the first open): the first attempt uses it instead of opening the folder again.
    func load(_ state: inout EngineState, folderJustOpened: Bool = false) throws(TinyStorageError) {
        for attempt in 0..<64 {
            guard let coordination = state.coordination.file else {
                throw TinyStorageError(.unavailable, "The store is not open.")
            }
            let folder: StoreFolder
            if attempt == 0, folderJustOpened, let opened = state.log.folder {
                folder = opened
            } else {
                folder = try openFolder()
            }
            state.log.folder = folder
            // NB: read before the page and the file, so a commit made while reading is not marked seen.
            let sequence = coordination.sequence
            // NB: the file is opened and its header read before the page: a file's generation
            // never changes, so when the page names that generation, the page's length is this
            // file's, however long the rest of the read takes (a compaction renaming a new file
            // over it meanwhile changes nothing in the file this descriptor reads).
            guard
                let fd = try folder.openFile(StoreLocation.dataFileName, writable: !options.readOnly, creation: .never)
            else {
                try createDataFile(&state)
                continue
            }
            let file = DataFile(fd: fd, io: io, scheduler: options.flushScheduler)
            let head: Data
            switch io.readData(fd, count: LogFormat.headerSize, at: 0) {
            case .success(let value): head = value
            case .failure(let error): throw .system(error, "read", path: location.dataPath)
            }
            // NB: read-only, a page nothing was published on during this boot is not fixed (a
            // repair's job): the whole file is read and checked against its own durable mark.
            let published: (generation: UInt64, length: Int)
            if let consistent = coordination.consistentPublished {
                published = consistent
            } else if options.readOnly, case .success(let decoded) = head.withUnsafeBytes({ LogHeader.decode($0) }) {
                published = (decoded.generation, 0)
            } else {
                try repair(&state)  // nothing published during this boot
                return
            }
            let header: LogHeader
            switch head.withUnsafeBytes({ LogHeader.decode($0) }) {
            case .failure(.newerVersion(let version)):
                throw Self.newerFormat(version, path: location.dataPath)
            case .failure:
                try repair(&state)  // an empty file (a crash while one was created), or damage
                return
            case .success(let decoded) where decoded.generation != published.generation:
                // Replaced between the open and the look at the page: open the new one. NB: a
                // file renamed into place is published under the same hold of the commit lock, so
                // when the two still disagree after a few looks, the lock is taken once: a live
                // holder finishes publishing before it lets go, and a holder killed between the
                // rename and the publish is reported (`EOWNERDEAD`), which makes the page say
                // nothing is published, and the file is checked from its start. When they still
                // disagree after that, the page is not this file's (a store folder restored from
                // copies taken at different moments): the file is checked from its start, and its
                // generation published.
                if attempt >= 8 {
                    try repair(&state)
                    return
                }
                if attempt >= 4, !LockWitness.isHolding(.file), (try? coordination.lock()) != nil {
                    coordination.unlock()
                }
                continue
            case .success(let decoded):
                header = decoded
            }
            // NB: the whole file, not the page's length of it: the page may be behind the file.
            let size: Int
            switch io.status(fd) {
            case .success(let status): size = status.size
            case .failure(let error): throw .system(error, "inspect", path: location.dataPath)
            }
            let buffer: Data
            switch io.readData(fd, count: size, at: 0) {
            case .success(let value): buffer = value
            case .failure(let error): throw .system(error, "read", path: location.dataPath)
            }
            var fresh = scanCommitted(buffer, header: header, state: state)
            let durable = head.withUnsafeBytes { LogHeader.durableMark(in: $0) }
            guard fresh.log.end >= published.length, fresh.log.end >= durable else {
                // NB: bytes the page or the file's own durable mark says were committed do not
                // verify, or are missing: damage, a cut-short file, or a page from elsewhere.
                try repair(&state)
                return
            }
            fresh.log.generation = published.generation
            fresh.log.dataFile = file
            fresh.coordination.seenSequence = sequence
            install(fresh, replacing: &state, records: buffer.prefix(fresh.log.end))
            // NB: a store too large for reads to walk its operations builds its index now: its
            // first read would wait for it anyway, and a build in the background would race it.
            // So does an empty one (a new store): nothing to build, no queue to wake.
            if let pending = state.index.pending {
                if pending.isWalkable, !pending.operations.isEmpty {
                    buildIndexSoon()
                } else {
                    state.index.buildPending()
                }
            }
            if state.log.mayHaveDeadTail || state.log.end > published.length, !LockWitness.isHolding(.file),
                !options.readOnly
            {
                // NB: under the lock, where no append can be under way: what lies past the log is
                // cut (and copied after it), and a page behind the file (a writer killed between
                // its append and its publish, a page put back from a copy) is brought up to it, so
                // that processes taking the page for current read what this one read. When it
                // fails, the next commit does both.
                let published = try? withFileLock(&state) { (state) throws(TinyStorageError) -> Bool in
                    try cutDeadTail(&state)
                    return publishIfBehind(&state)
                }
                if published == true { state.coordination.file?.signalChange() }
                setAsideDeadTail(&state)
            }
            return
        }
        throw TinyStorageError(
            .io, "The data file '\(location.dataPath)' kept being replaced while it was being read; try again.")
    }

    /// Checks the records of `buffer` (a whole file, `header` included) and makes a fresh state
    /// of those that verify and continue the sequence, its index not built yet (see
    /// ``PendingIndex``). The log ends after the last of them (``LogState/end``); anything
    /// but zeros after it is noted in ``LogState/deadTailEnd``.
    func scanCommitted(_ buffer: Data, header: LogHeader, state: EngineState) -> EngineState {
        var fresh = emptyState(like: state, expectedSize: 0)
        fresh.log.formatVersion = header.version
        fresh.log.sequence = header.baseSequence
        fresh.log.baseSequence = header.baseSequence
        fresh.log.snapshotRecords = header.snapshotRecords
        // NB: each operation is noted where its key and value lie in the buffer (no key made, no
        // value, no dictionary).
        var operations: [PendingIndex.Operation] = []
        operations.reserveCapacity(buffer.count / 128)
        var logSequence = header.baseSequence
        var lastRecord = (operations: 0, sequence: header.baseSequence)
        let scanned = buffer.withUnsafeBytes { raw in
            let origin = raw.baseAddress
            return LogScanner.scanOperations(
                raw, from: header.size, version: header.version,
                sequencedAfter: header.version >= 2 ? header.baseSequence : nil,
                record: { sequence, clearsFirst in
                    lastRecord = (operations.count, logSequence)
                    if sequence != 0 { logSequence = sequence }
                    if clearsFirst {
                        operations.append(.init(keyStart: 0, keyCount: 0, valueStart: 0, valueCount: 0, kind: .clear))
                    }
                },
                operation: { operation in
                    guard let origin else { return }
                    let keyStart = operation.key.baseAddress.map { $0 - origin } ?? 0
                    let valueStart = operation.value?.baseAddress.map { $0 - origin } ?? 0
                    operations.append(
                        .init(
                            keyStart: keyStart, keyCount: operation.key.count, valueStart: valueStart,
                            valueCount: operation.value?.count ?? 0,
                            kind: operation.value == nil
                                ? .remove : .put(operation.kind, expires: operation.deadline != nil)))
                    if let deadline = operation.deadline { fresh.expiry.note(deadline) }
                },
                discard: {
                    operations.removeSubrange(lastRecord.operations...)
                    logSequence = lastRecord.sequence
                })
        }
        fresh.log.sequence = logSequence
        fresh.index.pending = PendingIndex(buffer: buffer, operations: operations)
        fresh.log.readRecords(through: scanned.end)
        if scanned.stop != .end {
            fresh.log.deadTailEnd = buffer.withUnsafeBytes { Self.endOfNonZeroBytes(in: $0, from: scanned.end) }
        }
        return fresh
    }

    /// Where the last byte other than zero in `bytes` ends, looking from `start`; `start` when
    /// there is none.
    static func endOfNonZeroBytes(in bytes: UnsafeRawBufferPointer, from start: Int) -> Int {
        guard let base = bytes.baseAddress else { return start }
        var last = bytes.count
        // NB: a word at a time: on Linux a file goes on past its log with up to 1 MiB of zeros.
        while last - 8 >= start, base.loadUnaligned(fromByteOffset: last - 8, as: UInt64.self) == 0 { last -= 8 }
        while last > start, base.load(fromByteOffset: last - 1, as: UInt8.self) == 0 { last -= 1 }
        return max(last, start)
    }

    /// A state with nothing read yet, keeping what outlives a reload (``install(_:replacing:)``
    /// adds the recoveries and messages of the state it replaces).
    func emptyState(like state: EngineState, expectedSize: Int) -> EngineState {
        var fresh = EngineState()
        // NB: a guess from the file size saves most rehashing while loading.
        fresh.index.built.reserveCapacity(max(state.index.built.count, expectedSize / 128, 16))
        fresh.index.nextVersion = state.index.nextVersion
        fresh.index.decodedLimit = state.index.decodedLimit
        fresh.index.sizeLimit = state.index.sizeLimit
        fresh.coordination.file = state.coordination.file
        fresh.log.folder = state.log.folder
        fresh.coordination.mirror = state.coordination.mirror
        fresh.expiry.announcedThrough = state.expiry.announcedThrough
        return fresh
    }

    /// Puts a freshly read state in place and announces what changed for whoever read the old one.
    ///
    /// When the store was open, the old file (replaced by another process's compaction or
    /// repair) is first read to its end through the descriptor still open on it, then the new
    /// file's `records` are applied on top, so each commit made since the last look is announced
    /// on its own, with its writeID: the compacted records repeat values already there (nothing
    /// to announce), the ones after them are the commits made since. Whatever still differs from
    /// the new file is announced as one more change.
    ///
    /// - Parameter records: The new file's bytes, header included, when they are at hand.
    func install(_ fresh: EngineState, replacing state: inout EngineState, records: Data? = nil) {
        var fresh = fresh
        let wasOpen = state.isOpen
        if wasOpen, fresh.log.generation != state.log.generation {
            if let old = state.log.dataFile { drainReplacedFile(old, into: &state) }
            if let records, records.count <= fresh.log.end {
                // NB: the new file starts with a snapshot of the old one, then the commits copied
                // from the old file's tail, numbered on after the snapshot: the drain above
                // applied both already, and announcing them again would send values back in time.
                // Only the commits made to the new file are applied and announced here.
                let applied =
                    state.log.formatVersion >= 2 && fresh.log.baseSequence <= state.log.sequence
                    ? state.log.sequence + UInt64(fresh.log.snapshotRecords) : nil
                records.withUnsafeBytes { raw in
                    let version = fresh.log.formatVersion
                    _ = LogScanner.scan(raw, from: LogFormat.headerSize(version: version), version: version) { commit in
                        if let applied, commit.sequence <= applied { return }
                        if let change = apply(commit, to: &state, isExternal: true) {
                            enqueueChange(change, in: &state)
                        }
                    }
                }
                state.log.sequence = fresh.log.sequence
            }
        }
        // NB: a store that was open compares its entries with the new file's, which builds both
        // indexes; a first open leaves the new one to be built later.
        let change = wasOpen ? difference(from: &state, to: &fresh) : nil
        fresh.deferredLogs = state.deferredLogs + fresh.deferredLogs
        fresh.recovery.reports = state.recovery.reports + fresh.recovery.reports
        fresh.recovery.pendingDataLoss = fresh.recovery.pendingDataLoss ?? state.recovery.pendingDataLoss
        fresh.index.nextVersion = max(fresh.index.nextVersion, state.index.nextVersion)
        // NB: value streams opened before the reload still need the values of later changes.
        fresh.changes.carriesValues = fresh.changes.carriesValues || state.changes.carriesValues
        fresh.log.recordBuffer = state.log.recordBuffer
        // NB: changes queued and not yet drained, and their numbering, stay with the store, and
        // so do the expiries announced and the wake asked for; the new entries' deadlines join.
        swap(&fresh.changes, &state.changes)
        var expiry = state.expiry
        if let next = fresh.expiry.nextDeadline { expiry.note(next) }
        fresh.expiry = expiry
        state = fresh
        if let change { enqueueChange(change, in: &state) }
        requestExpiryWake(&state)
    }

    /// Applies what other processes appended to a file that has since been replaced.
    private func drainReplacedFile(_ file: DataFile, into state: inout EngineState) {
        guard case .success(let status) = io.status(file.fd), status.size > state.log.end else { return }
        guard case .success(let tail) = io.read(file.fd, count: status.size - state.log.end, at: state.log.end) else {
            return
        }
        let sequencedAfter = state.log.formatVersion >= 2 ? state.log.sequence : nil
        tail.withUnsafeBytes { raw in
            _ = LogScanner.scan(raw, from: 0, version: state.log.formatVersion, sequencedAfter: sequencedAfter) {
                commit in
                if let change = apply(commit, to: &state, isExternal: true) { enqueueChange(change, in: &state) }
            }
        }
    }

    /// The keys whose values differ between two states, as one external change: as observers
    /// last heard of them in `old` (an entry whose expiry was announced is absent there, see
    /// ``ExpiryState/wasAnnounced(_:)``), as readers see them now in `new` (an entry whose
    /// deadline has passed is absent). A compaction that dropped expired values changes nothing.
    func difference(from old: inout EngineState, to new: inout EngineState) -> ChangeSet? {
        var keys: [String] = []
        var values: [StoredValue?] = []
        let expiry = old.expiry
        var now: UInt64?
        func isLive(_ entry: CachedEntry) -> Bool {
            guard entry.expires else { return true }
            if now == nil { now = options.clock.now() }
            return !entry.hasExpired(at: now ?? 0)
        }
        func announced(_ entry: CachedEntry?) -> StoredValue? {
            entry.flatMap { expiry.wasAnnounced($0.deadline) ? $0.stored : nil }
        }
        for (key, entry) in new.index.entries {
            let value = isLive(entry) ? entry.stored : nil
            guard announced(old.index.entries[key]) != value else { continue }
            keys.append(key)
            values.append(value)
        }
        for (key, entry) in old.index.entries where new.index.entries[key] == nil && announced(entry) != nil {
            keys.append(key)
            values.append(nil)
        }
        return keys.isEmpty ? nil : ChangeSet(keys: SmallList(keys), values: values, writeID: nil, isExternal: true)
    }

    static func newerFormat(_ version: UInt32, path: String) -> TinyStorageError {
        TinyStorageError(
            .unsupportedFormat,
            "'\(path)' uses format version \(version), written by a newer TinyStorage. "
                + "Update the library; the file was left untouched.")
    }

    // MARK: A new file

    /// Creates the data file of a new store — holding the original TinyStorage's values when
    /// its `tiny-storage.plist` is there to adopt — without the cross-process lock.
    ///
    /// The file is written and flushed under a name no one can predict, then renamed into place
    /// only if no other process created one meanwhile (`renameat2(RENAME_NOREPLACE)`,
    /// `renameatx_np(RENAME_EXCL)`). The plist is read before anything is created, so an
    /// unreadable one leaves no empty store behind.
    func createDataFile(_ state: inout EngineState) throws(TinyStorageError) {
        if options.readOnly { throw needsWriter("has no data file yet") }
        guard let folder = state.log.folder, let coordination = state.coordination.file else {
            throw TinyStorageError(.unavailable, "The store is not open.")
        }
        let adopted = try originalDataToAdopt(in: folder)
        let generation = max(coordination.published.generation + 1, 1)
        var bytes = LogHeader(generation: generation).encoded()
        adopted?.encode(into: &bytes)  // the first record: sequence 1
        let temporary = try writeVerifiedFile(in: folder, bytes: bytes, noting: coordination)
        switch folder.renameWithoutReplacing(temporary.name, to: StoreLocation.dataFileName) {
        case .success:
            if case .failure(let error) = folder.sync() {
                state.note("Could not sync the store directory after creating its file: \(error).", level: .warning)
            }
            // NB: and the folder's own name: the process that made the folder may have died before
            // it flushed its parent (or the app made it and never did), and a power loss would then
            // take the folder with every `.immediate` commit flushed inside it (found by the
            // simulation).
            if case .failure(let error) = io.syncNames(inDirectoryAt: location.parentPath) {
                state.note(
                    "Could not sync the directory that holds the store after creating its file: \(error).",
                    level: .warning)
            }
        case .failure(.exists):
            _ = folder.remove(temporary.name)  // another process created it first: use theirs
        case .failure(let error):
            _ = folder.remove(temporary.name)
            throw .system(error, "create", path: location.dataPath)
        }
        if adopted != nil {
            state.note(
                "Imported the original TinyStorage file \(location.originalFilePath); the file is kept.", level: .info)
        }
    }
}
