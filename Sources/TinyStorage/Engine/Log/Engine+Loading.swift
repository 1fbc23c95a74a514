import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension Engine {
    /// Opens the store's folder and lock page, then reads the data file.
    ///
    /// A missing directory or data file is a new, empty store. Anything that exists but cannot be
    /// read makes the store unavailable: it is never treated as empty. The folder and every file
    /// lose their data protection before they are opened (see ``StoreFolder``), and one warning
    /// names what had some.
    func open(_ state: inout EngineState) throws(TinyStorageError) {
        if let nameError {
            state.failure = nameError
            throw nameError
        }
        defer { noteProtectionRemovals(&state) }
        do throws(TinyStorageError) {
            let folder = try openFolder()
            state.folder = folder
            if state.coordination == nil {
                let coordination = try CoordinationFile(
                    in: folder, name: StoreLocation.lockFileName,
                    sharedMutex: options.platform.commitLock == .sharedMutex)
                state.coordination = coordination
                mirror.attach(coordination)
            }
            try load(&state, folderJustOpened: true)
            state.failure = nil
        } catch {
            let failure = error.code == .unavailable ? error : unavailable(error)
            state.failure = failure
            throw failure
        }
    }

    /// Opens the store's folder, creating it and the directory that holds it when missing.
    func openFolder() throws(TinyStorageError) -> StoreFolder {
        guard
            let folder = try StoreFolder.open(
                parentPath: location.parentPath, name: location.folderName, io: io, create: true,
                removals: protectionRemovals)
        else {
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
    /// - Parameter folderJustOpened: Whether `state.folder` was opened by the caller a moment ago
    ///   (the first open): the first attempt uses it instead of opening the folder again.
    func load(_ state: inout EngineState, folderJustOpened: Bool = false) throws(TinyStorageError) {
        for attempt in 0..<64 {
            guard let coordination = state.coordination else {
                throw TinyStorageError(.unavailable, "The store is not open.")
            }
            let folder: StoreFolder
            if attempt == 0, folderJustOpened, let opened = state.folder {
                folder = opened
            } else {
                folder = try openFolder()
            }
            state.folder = folder
            // NB: read before the page and the file, so a commit made while reading is not marked seen.
            let sequence = coordination.sequence
            // NB: the file is opened and its header read before the page: a file's generation
            // never changes, so when the page names that generation, the page's length is this
            // file's, however long the rest of the read takes (a compaction renaming a new file
            // over it meanwhile changes nothing in the file this descriptor reads).
            guard let fd = try folder.openFile(StoreLocation.dataFileName, writable: true, creation: .never) else {
                try createDataFile(&state)
                continue
            }
            let file = DataFile(fd: fd, io: io, scheduler: options.flushScheduler)
            let head: Data
            switch io.readData(fd, count: LogFormat.headerSize, at: 0) {
            case .success(let value): head = value
            case .failure(let error): throw .system(error, "read", path: location.dataPath)
            }
            guard let published = coordination.consistentPublished else {
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
            guard fresh.end >= published.length, fresh.end >= durable else {
                // NB: bytes the page or the file's own durable mark says were committed do not
                // verify, or are missing: damage, a cut-short file, or a page from elsewhere.
                try repair(&state)
                return
            }
            fresh.generation = published.generation
            fresh.dataFile = file
            fresh.seenSequence = sequence
            install(fresh, replacing: &state, records: buffer.prefix(fresh.end))
            // NB: a store too large for reads to walk its operations builds its index now: its
            // first read would wait for it anyway, and a build in the background would race it.
            // So does an empty one (a new store): nothing to build, no queue to wake.
            if let pending = state.pendingIndex {
                if pending.isWalkable, !pending.operations.isEmpty {
                    buildIndexSoon()
                } else {
                    state.buildPendingIndex()
                }
            }
            if state.mayHaveDeadTail || state.end > published.length, !LockWitness.isHolding(.file) {
                // NB: under the lock, where no append can be under way: what lies past the log is
                // cut (and copied after it), and a page behind the file (a writer killed between
                // its append and its publish, a page put back from a copy) is brought up to it, so
                // that processes taking the page for current read what this one read. When it
                // fails, the next commit does both.
                let published = try? withFileLock(&state) { (state) throws(TinyStorageError) -> Bool in
                    try cutDeadTail(&state)
                    return publishIfBehind(&state)
                }
                if published == true { state.coordination?.signalChange() }
                setAsideDeadTail(&state)
            }
            return
        }
        throw TinyStorageError(
            .io, "The data file '\(location.dataPath)' kept being replaced while it was being read; try again.")
    }

    /// Checks the records of `buffer` (a whole file, `header` included) and makes a fresh state
    /// of those that verify and continue the sequence, its index not built yet (see
    /// ``PendingIndex``). The log ends after the last of them (``EngineState/end``); anything
    /// but zeros after it is noted in ``EngineState/deadTailEnd``.
    func scanCommitted(_ buffer: Data, header: LogHeader, state: EngineState) -> EngineState {
        var fresh = emptyState(like: state, expectedSize: 0)
        fresh.formatVersion = header.version
        fresh.logSequence = header.baseSequence
        fresh.baseSequence = header.baseSequence
        fresh.snapshotRecords = header.snapshotRecords
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
                            kind: operation.value == nil ? .remove : .put(operation.kind)))
                },
                discard: {
                    operations.removeSubrange(lastRecord.operations...)
                    logSequence = lastRecord.sequence
                })
        }
        fresh.logSequence = logSequence
        fresh.pendingIndex = PendingIndex(buffer: buffer, operations: operations)
        fresh.end = scanned.end
        if scanned.stop != .end {
            fresh.deadTailEnd = buffer.withUnsafeBytes { Self.endOfNonZeroBytes(in: $0, from: scanned.end) }
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
        fresh.builtEntries.reserveCapacity(max(state.builtEntries.count, expectedSize / 128, 16))
        fresh.nextVersion = state.nextVersion
        fresh.coordination = state.coordination
        fresh.folder = state.folder
        fresh.mirror = state.mirror
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
        if wasOpen, fresh.generation != state.generation {
            if let old = state.dataFile { drainReplacedFile(old, into: &state) }
            if let records, records.count <= fresh.end {
                // NB: the new file starts with a snapshot of the old one, then the commits copied
                // from the old file's tail, numbered on after the snapshot: the drain above
                // applied both already, and announcing them again would send values back in time.
                // Only the commits made to the new file are applied and announced here.
                let applied =
                    state.formatVersion >= 2 && fresh.baseSequence <= state.logSequence
                    ? state.logSequence + UInt64(fresh.snapshotRecords) : nil
                records.withUnsafeBytes { raw in
                    let version = fresh.formatVersion
                    _ = LogScanner.scan(raw, from: LogFormat.headerSize(version: version), version: version) { commit in
                        if let applied, commit.sequence <= applied { return }
                        if let change = apply(commit, to: &state, isExternal: true) {
                            enqueueChange(change, in: &state)
                        }
                    }
                }
                state.logSequence = fresh.logSequence
            }
        }
        // NB: a store that was open compares its entries with the new file's, which builds both
        // indexes; a first open leaves the new one to be built later.
        let change = wasOpen ? Self.difference(from: &state, to: &fresh) : nil
        fresh.deferredLogs = state.deferredLogs + fresh.deferredLogs
        fresh.recoveries = state.recoveries + fresh.recoveries
        fresh.pendingDataLoss = fresh.pendingDataLoss ?? state.pendingDataLoss
        fresh.nextVersion = max(fresh.nextVersion, state.nextVersion)
        // NB: value streams opened before the reload still need the values of later changes.
        fresh.changesCarryValues = fresh.changesCarryValues || state.changesCarryValues
        fresh.recordBuffer = state.recordBuffer
        // NB: changes queued and not yet drained, and their numbering, stay with the store.
        swap(&fresh.pendingChanges, &state.pendingChanges)
        state = fresh
        if let change { enqueueChange(change, in: &state) }
    }

    /// Applies what other processes appended to a file that has since been replaced.
    private func drainReplacedFile(_ file: DataFile, into state: inout EngineState) {
        guard case .success(let status) = io.status(file.fd), status.size > state.end else { return }
        guard case .success(let tail) = io.read(file.fd, count: status.size - state.end, at: state.end) else {
            return
        }
        let sequencedAfter = state.formatVersion >= 2 ? state.logSequence : nil
        tail.withUnsafeBytes { raw in
            _ = LogScanner.scan(raw, from: 0, version: state.formatVersion, sequencedAfter: sequencedAfter) { commit in
                if let change = apply(commit, to: &state, isExternal: true) { enqueueChange(change, in: &state) }
            }
        }
    }

    /// The keys whose bytes differ between two states, as one external change.
    static func difference(from old: inout EngineState, to new: inout EngineState) -> ChangeSet? {
        var keys: [String] = []
        var values: [StoredValue?] = []
        for (key, entry) in new.entries where old.entries[key]?.stored != entry.stored {
            keys.append(key)
            values.append(entry.stored)
        }
        for key in old.entries.keys where new.entries[key] == nil {
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

    // MARK: Catching up

    /// Publishes the log's end when the page, for this file, says less: records that verify and
    /// continue the sequence were found past it. Call under the file lock, caught up.
    ///
    /// - Returns: whether it published (signal the change once the lock is let go).
    func publishIfBehind(_ state: inout EngineState) -> Bool {
        guard let coordination = state.coordination, state.dataFile != nil, coordination.isInitialized else {
            return false
        }
        let published = coordination.published
        guard published.generation == state.generation, published.length < state.end else { return false }
        state.seenSequence = coordination.publish(generation: state.generation, length: state.end)
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
        guard state.isCurrent else { return false }
        guard let file = state.dataFile else { return true }
        let end = state.end
        if state.appendMapping?.covers(file, through: end + LogFormat.frameSize) == true,
            let base = state.appendMapping?.base
        {
            // NB: one 8-byte load (a frame is 8 bytes): a byte loop over it cost an `Int`
            // overwrite about 12% in the benchmark.
            return UnsafeRawPointer(base).loadUnaligned(fromByteOffset: end, as: UInt64.self) == 0
        }
        guard case .success(let frame) = io.read(file.fd, count: LogFormat.frameSize, at: end) else { return false }
        return frame.allSatisfy { $0 == 0 }
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
        guard let coordination = state.coordination, let file = state.dataFile else { return false }
        let published = coordination.published
        guard coordination.isInitialized, published.generation == state.generation,
            try applyTail(of: file, upTo: published.length, to: &state, underLock: true)
        else { return false }
        state.seenSequence = coordination.sequence
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
        guard let coordination = state.coordination, let file = state.dataFile else { return false }
        let sequence = coordination.sequence  // NB: read first, so later commits are not marked seen
        guard let published = coordination.consistentPublished, published.generation == state.generation,
            (try? applyTail(of: file, upTo: published.length, to: &state, underLock: false)) == true
        else { return false }
        state.seenSequence = sequence
        return true
    }

    /// Reads and applies the records from `state.end` on. Those up to `length` (the page's
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
    ///   died, noted to be cut before the next one (``EngineState/deadTailEnd``). Without the
    ///   lock it may be an append under way, and is left alone.
    /// - Returns: `false` when the bytes up to `length` do not verify as whole records.
    private func applyTail(
        of file: DataFile, upTo length: Int, to state: inout EngineState, underLock: Bool
    ) throws(TinyStorageError) -> Bool {
        var commits: [LogCommit] = []
        var end = state.end
        var sequence = state.logSequence
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
                    $0, from: 0, version: state.formatVersion, sequencedAfter: state.formatVersion >= 2 ? sequence : nil
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
        state.end = end
        if underLock, stop != .end { state.mayHaveDeadTail = true }
        return true
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
        guard let folder = state.folder, let coordination = state.coordination else {
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
