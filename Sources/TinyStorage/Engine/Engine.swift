import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One key's stored bytes and, once read, its decoded value.
struct CachedEntry {
    var bytes: Data
    /// How to read `bytes` (JSON, raw `Data`, or an original value of unknown meaning).
    var kind: ValueKind
    /// Bumped whenever `bytes` change, so a decode done outside the lock is cached only if still current.
    var version: UInt64
    /// A `DecodedValue<T>` holding the value decoded as `decodedType`. NB: only `Sendable` value
    /// types are cached, so two callers never share a class instance.
    var decoded: AnyObject?
    var decodedType: ObjectIdentifier?

    /// The bytes and their kind, as a commit compares and a reader decodes them.
    var stored: StoredValue { StoredValue(bytes, kind: kind) }
}

/// Keys changed by one commit, local or from another process.
struct ChangeSet: Sendable, Equatable {
    var keys: [String]
    /// The value each key holds after the commit (`nil`: removed), parallel to `keys`.
    var values: [StoredValue?]
    var writeID: String?
    var isExternal: Bool
    /// Numbered by ``ChangeDelivery`` in commit order.
    var sequence: UInt64 = 0
}

/// Everything the engine knows, guarded by one lock.
struct EngineState {
    var entries: [String: CachedEntry] = [:]
    /// The size a compacted file would have: the header plus one put record per entry.
    var liveBytes = LogFormat.headerSize
    var nextVersion: UInt64 = 0
    var generation: UInt64 = 0
    /// Offset just past the last committed record.
    var end = 0
    /// The data file's format version: a version 1 file is rewritten as the current version
    /// before anything is appended to it.
    var formatVersion = LogFormat.version
    /// The sequence number of the data file's last record (the header's base when it has none).
    var logSequence: UInt64 = 0
    /// The data file's size as last seen (larger than `end` when zero-filled ahead).
    var physicalSize = 0
    var seenSequence: UInt64 = 0 {
        didSet { mirror?.store(seenSequence) }
    }
    /// A lock-free copy of `seenSequence`, for the change monitor's cheap "anything new?" check.
    var mirror: SequenceMirror?
    var dataFile: DataFile?
    var coordination: CoordinationFile?
    /// Why the last attempt to open failed; `nil` while open or never tried.
    var failure: TinyStorageError?
    /// Damage found and set aside so far.
    var recoveries: [TinyStorage.RecoveryReport] = []
    /// Keeps the file-system watch alive while the store is open.
    var watch: ChangeMonitor.Watch?

    /// An in-memory store: no files, always open, nothing to catch up with.
    var inMemory = false

    var isOpen: Bool { inMemory || dataFile != nil }
    /// Whether no other process has committed since this state was last brought up to date.
    var isCurrent: Bool { inMemory || coordination?.sequence == seenSequence }
}

/// The storage engine: an append-only, checksummed log with an in-memory index.
///
/// All state lives in one ``Locked`` box. Commits also take the cross-process lock on the lock
/// file (`flock(2)`), bring the in-memory state up to date with other processes, append one
/// record, and publish the new length through the shared counter page. Reads never touch the
/// disk unless another process has committed since the last look.
///
/// Lock order: the in-process lock, then the file lock. Neither is held while the caller's code
/// outside the engine runs, except `update` closures, which must not use the store.
final class Engine: Sendable, FileChangeListener {
    let location: StoreLocation
    let io: FileIO
    let durability: TinyStorage.Durability
    let logger: LogSink
    let nameError: TinyStorageError?
    let state: Locked<EngineState>
    /// Hands changes to the store's listener, in commit order, off the committing thread.
    let delivery: ChangeDelivery
    /// What the state has seen of the shared counter, readable without the engine's lock.
    let mirror = SequenceMirror()

    /// Compaction waits until the log is at least this large…
    static let minimumCompactionSize = 1 << 20
    /// …and this many times larger than the compacted file would be.
    static let compactionRatio = 4

    init(
        location: StoreLocation, nameError: TinyStorageError?, durability: TinyStorage.Durability,
        io: FileIO, logger: any TinyStorageLogging, inMemory: Bool = false,
        announcingOn announcingQueue: DispatchQueue = .main
    ) {
        self.location = location
        self.nameError = nameError
        self.durability = durability
        self.io = io
        self.logger = LogSink(logger)
        self.delivery = ChangeDelivery(announcingOn: announcingQueue)
        self.state = Locked(EngineState())
        state.withLock { $0.mirror = mirror }
        if inMemory {
            state.withLock { $0.inMemory = true }
            return
        }
        let failure: TinyStorageError? = state.withLock { state in
            do throws(TinyStorageError) {
                try open(&state)
                return nil
            } catch {
                return error
            }
        }
        if let failure { log(failure) }
        startWatching()
    }

    /// Tells `listener` about every change, local or external, outside all locks.
    func setListener(_ listener: any EngineListener) {
        delivery.setListener(listener)
    }

    /// Asks the change monitor to report file events in the store directory, if not yet done.
    private func startWatching() {
        let needed = state.withLock { $0.watch == nil }
        guard needed else { return }
        let watch = ChangeMonitor.shared.watch(
            directoryPath: location.directoryPath, dataFilePath: location.dataPath, listener: self)
        state.withLock { if $0.watch == nil { $0.watch = watch } }
    }

    // MARK: Reading

    /// Gives `body` the current entries: opened if needed, and caught up with other processes.
    func withEntries<R>(_ body: (inout [String: CachedEntry]) -> R) throws(TinyStorageError) -> R {
        try state.withLock { (state) throws(TinyStorageError) -> R in
            try prepare(&state)
            return body(&state.entries)
        }
    }

    /// The value cached for `key` if it was decoded as `type` before, without any checks; `nil`
    /// sends the caller down the full path (absent, unavailable, not yet decoded…).
    func cachedValue(forKey key: String, decodedAs type: ObjectIdentifier) -> AnyObject? {
        state.withLock { state in
            guard state.isOpen, state.isCurrent,
                let entry = state.entries[key], entry.decodedType == type
            else { return nil }
            return entry.decoded
        }
    }

    /// The value stored for `key` and its version, or `nil` when absent.
    func encodedValue(forKey key: String) throws(TinyStorageError) -> (value: StoredValue, version: UInt64)? {
        try withEntries { entries in entries[key].map { ($0.stored, $0.version) } }
    }

    /// Keeps `box`, decoded from the entry's bytes at `version`, unless they changed meanwhile.
    func cache(_ box: AnyObject, as type: ObjectIdentifier, forKey key: String, version: UInt64) {
        state.withLock { state in
            guard state.entries[key]?.version == version else { return }
            state.entries[key]?.decoded = box
            state.entries[key]?.decodedType = type
        }
    }

    /// Why the store cannot be used right now, after one more attempt to open it; `nil` when it can.
    func currentFailure() -> TinyStorageError? {
        state.withLock { state in
            do throws(TinyStorageError) {
                try prepare(&state)
                return nil
            } catch {
                return state.failure ?? error
            }
        }
    }

    // MARK: Committing

    /// What a commit's builder decided.
    struct Plan<Result> {
        /// The record to append, or `nil` when nothing changes.
        var commit: LogCommit?
        var result: Result
    }

    /// Runs `build` against the current entries under both locks and appends the commit it returns.
    ///
    /// - Returns: `build`'s result.
    /// - Throws: `.unavailable` when the store cannot be opened, system errors from the append,
    ///   and whatever `build` throws. Nothing is written when anything throws before the append.
    func commit<Result>(
        _ build: ([String: CachedEntry]) throws(TinyStorageError) -> Plan<Result>
    ) throws(TinyStorageError) -> Result {
        var flush: (file: DataFile, end: Int)?
        let result = try state.withLock { (state) throws(TinyStorageError) -> Result in
            try ensureOpen(&state)
            return try withFileLock(&state) { (state) throws(TinyStorageError) -> Result in
                if !state.isCurrent { try catchUp(&state) }
                let plan = try build(state.entries)
                guard var commit = plan.commit else { return plan.result }
                // NB: every API checks its writeID first; this keeps a longer one out of the format.
                _ = try TinyStorage.validatedWriteID(commit.writeID)
                // NB: a file only ever holds records of its header's version, so an old file is
                // rewritten in the current format (as a compaction does) before the first append.
                if state.formatVersion != LogFormat.version, !state.inMemory { try compact(&state) }
                commit.sequence = state.logSequence + 1
                try append(commit, to: &state)
                if let file = state.dataFile { flush = (file, state.end) }
                // NB: enqueued under the lock, so changes are delivered in commit order.
                if let change = apply(commit, to: &state, isExternal: false) { delivery.enqueue(change) }
                compactIfNeeded(&state)
                return plan.result
            }
        }
        // `.immediate` commits were flushed before they were published (see `append`).
        if let flush, durability == .standard {
            flush.file.scheduleBackgroundSync(through: flush.end, logger: logger)
        }
        return result
    }

    // MARK: Internals

    func log(_ error: TinyStorageError, file: String = #fileID, function: String = #function, line: Int = #line) {
        logger.log(.error, error.description, file: file, function: function, line: line)
    }

    /// Opens the store if needed, then catches up when another process has committed.
    private func prepare(_ state: inout EngineState) throws(TinyStorageError) {
        try ensureOpen(&state)
        if !state.isCurrent, !catchUpWithoutFileLock(&state) {
            try withFileLock(&state) { (state) throws(TinyStorageError) in try catchUp(&state) }
        }
    }

    func ensureOpen(_ state: inout EngineState) throws(TinyStorageError) {
        if state.isOpen { return }
        let previous = state.failure
        do throws(TinyStorageError) {
            try open(&state)
            if previous != nil {
                logger.log(.notice, "Store at \(location.directoryPath) is available again.")
                // Everything "changed" for whoever saw the store unavailable.
                let keys = Array(state.entries.keys)
                if !keys.isEmpty {
                    delivery.enqueue(
                        ChangeSet(
                            keys: keys, values: keys.map { state.entries[$0]?.stored }, writeID: nil, isExternal: true))
                }
            }
        } catch {
            if previous?.code != error.code { log(error) }
            throw error
        }
    }

    /// Runs `body` holding the cross-process lock.
    func withFileLock<R>(
        _ state: inout EngineState, _ body: (inout EngineState) throws(TinyStorageError) -> R
    ) throws(TinyStorageError) -> R {
        if state.inMemory { return try body(&state) }
        guard let coordination = state.coordination else {
            throw TinyStorageError(.unavailable, "The store is not open.")
        }
        do throws(Errno) {
            try coordination.lock()
        } catch {
            throw unavailable(.system(error, "lock", path: coordination.path))
        }
        defer { coordination.unlock() }
        return try body(&state)
    }

    func unavailable(_ cause: TinyStorageError) -> TinyStorageError {
        TinyStorageError(
            .unavailable,
            "The store at '\(location.directoryPath)' cannot be read right now, so TinyStorage will "
                + "neither answer from it nor write to it. \(cause.message)",
            underlying: cause)
    }

    /// Appends one record at `state.end` and publishes it.
    private func append(_ commit: LogCommit, to state: inout EngineState) throws(TinyStorageError) {
        if state.inMemory { return }
        guard let file = state.dataFile, let coordination = state.coordination else {
            throw TinyStorageError(.unavailable, "The store is not open.")
        }
        let record = commit.encoded()
        if durability == .immediate { try preallocate(record.count, &state) }
        let written = record.withUnsafeBytes { io.write(file.fd, $0, at: state.end) }
        if case .failure(let error) = written {
            // NB: remove whatever part of the record reached the file so a later open cannot see
            // a commit we reported as failed. Zero-filled space past `end` is fine to lose.
            _ = io.truncate(file.fd, to: state.end)
            state.physicalSize = state.end
            throw .system(error, "append to", path: location.dataPath)
        }
        if durability == .immediate {
            // NB: flushed before it is published or applied, so a failed flush leaves nothing
            // behind: not in memory, not for other processes, not in the file.
            do throws(Errno) {
                try file.sync(through: state.end + record.count)
            } catch {
                _ = io.truncate(file.fd, to: state.end)
                state.physicalSize = state.end
                throw TinyStorageError(
                    .io,
                    "Flushing the change to stable storage failed, so it was not committed. Check the disk.",
                    underlying: error)
            }
        }
        state.end += record.count
        state.physicalSize = max(state.physicalSize, state.end)
        state.seenSequence = coordination.publish(generation: state.generation, length: state.end)
    }

    /// Makes sure the file already extends past the next record, with zeros written and synced,
    /// so a durable commit flushes only data blocks, not the file's size (a journal commit).
    private func preallocate(_ count: Int, _ state: inout EngineState) throws(TinyStorageError) {
        guard let file = state.dataFile else { return }
        if state.end + count <= state.physicalSize { return }
        // Another process may have grown the file already.
        if case .success(let status) = io.status(file.fd) { state.physicalSize = status.size }
        if state.end + count <= state.physicalSize { return }
        let chunk = 256 << 10
        let target = (state.end + count + chunk) / chunk * chunk
        let zeros = [UInt8](repeating: 0, count: target - state.physicalSize)
        let result = zeros.withUnsafeBytes { io.write(file.fd, $0, at: state.physicalSize) }
            .flatMap { io.sync(file.fd) }
        if case .failure(let error) = result {
            _ = io.truncate(file.fd, to: state.end)
            throw .system(error, "preallocate space in", path: location.dataPath)
        }
        state.physicalSize = target
    }

    /// Applies a verified commit to the in-memory state.
    ///
    /// - Parameter collectChanges: `false` while loading a file, when nobody needs the keys.
    /// - Returns: the keys whose bytes changed, or `nil` when none did (or none were collected).
    @discardableResult
    func apply(
        _ commit: LogCommit, to state: inout EngineState, isExternal: Bool, collectChanges: Bool = true
    ) -> ChangeSet? {
        var changed: [String] = []
        var values: [StoredValue?] = []
        if commit.clearsFirst {
            if collectChanges {
                changed.append(contentsOf: state.entries.keys)
                values = Array(repeating: nil, count: changed.count)
            }
            state.entries.removeAll()
            state.liveBytes = LogFormat.headerSize
        }
        if commit.sequence != 0 { state.logSequence = commit.sequence }
        for operation in commit.operations {
            switch operation {
            case .put(let key, let value, let kind):
                let keyLength = key.utf8.count
                state.nextVersion &+= 1
                let entry = CachedEntry(bytes: value, kind: kind, version: state.nextVersion)
                if let old = state.entries.updateValue(entry, forKey: key) {
                    if old.bytes == value, old.kind == kind {
                        state.entries[key] = old  // unchanged: keep the decoded value
                        continue
                    }
                    state.liveBytes -= LogCommit.putRecordSize(keyLength: keyLength, valueLength: old.bytes.count)
                }
                state.liveBytes += LogCommit.putRecordSize(keyLength: keyLength, valueLength: value.count)
                if collectChanges {
                    changed.append(key)
                    values.append(StoredValue(value, kind: kind))
                }
            case .remove(let key):
                guard let old = state.entries.removeValue(forKey: key) else { continue }
                state.liveBytes -= LogCommit.putRecordSize(keyLength: key.utf8.count, valueLength: old.bytes.count)
                if collectChanges {
                    changed.append(key)
                    values.append(nil)
                }
            }
        }
        guard !changed.isEmpty else { return nil }
        if commit.clearsFirst || commit.operations.count > 1 {
            // Keep each key once, with its last value.
            var last: [String: Int] = [:]
            for (index, key) in changed.enumerated() { last[key] = index }
            let keep = changed.indices.filter { last[changed[$0]] == $0 }
            changed = keep.map { changed[$0] }
            values = keep.map { values[$0] }
        }
        return ChangeSet(keys: changed, values: values, writeID: commit.writeID, isExternal: isExternal)
    }

    // MARK: File events

    /// Called by the change monitor: catch up with other processes' commits, or try to open a
    /// store that was unavailable, so observers hear about it within milliseconds.
    func filesDidChange() {
        // NB: most events come from this process's own commits; answering those without the
        // engine's lock keeps the monitor thread from contending with writers.
        if mirror.isCurrent { return }
        let reopened: Bool = state.withLock { state in
            do throws(TinyStorageError) {
                let wasOpen = state.isOpen
                try prepare(&state)
                return !wasOpen
            } catch {
                return false
            }
        }
        if reopened { startWatching() }
    }
}
