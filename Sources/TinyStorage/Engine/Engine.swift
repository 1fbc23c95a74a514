import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One key's stored bytes and, once read, its decoded value.
///
/// NB: the fields are in this order so `kind` fills the padding after `decoded`'s tag: 48 bytes
/// a key, not 56 (memory held per key; cached reads measured the same either way).
struct CachedEntry {
    var bytes: ValueBytes
    /// Bumped whenever `bytes` change, so a decode done outside the lock is cached only if still current.
    var version: UInt64
    /// The value decoded from `bytes`, once read. NB: only `Sendable` value types are cached, so
    /// two callers never share a class instance.
    var decoded: DecodedCache = .none
    /// How to read `bytes` (JSON, raw `Data`, or an original value of unknown meaning).
    var kind: ValueKind

    /// The bytes and their kind, as a commit compares and a reader decodes them.
    var stored: StoredValue { StoredValue(bytes, kind: kind) }
}

/// What a ``CachedEntry`` keeps of its value once decoded.
///
/// NB: an `Int` is kept as it is, so a cached read of one retains and releases nothing (a box
/// cost it a fifth of its time), and in its box too, for the reads that ask for a box (typed
/// keys); other types in a `_DecodedValue<T>` box. As large as the box and its type alone were.
enum DecodedCache {
    case none
    /// An `Int`, and the same in a `_DecodedValue<Int>`.
    case int(Int, box: AnyObject)
    /// A `_DecodedValue<T>`, `type` being `ObjectIdentifier(T.self)`.
    case boxed(AnyObject, type: ObjectIdentifier)
}

/// Keys changed by one commit, local or from another process.
struct ChangeSet: Sendable, Equatable {
    /// NB: a ``SmallList``, so a commit of one key allocates no array for it.
    var keys: SmallList<String>
    /// The value each key holds after the commit (`nil`: removed), parallel to `keys`; empty
    /// until a value stream is opened (see ``Engine/carryValuesInChanges()``): only streams need them.
    var values: [StoredValue?]
    var writeID: String?
    var isExternal: Bool
    /// Numbered by ``ChangeDelivery`` in commit order.
    var sequence: UInt64 = 0
}

/// Everything the engine knows, guarded by one lock.
struct EngineState {
    /// Every key's entry. NB: built first from ``pendingIndex`` when the store was opened a
    /// moment ago and nothing has needed it yet (see ``PendingIndex``).
    var entries: EntryIndex {
        mutating get {
            buildPendingIndex()
            return builtEntries
        }
        set {
            pendingIndex = nil
            builtEntries = newValue
        }
        _modify {
            buildPendingIndex()
            yield &builtEntries
        }
    }
    /// The size a compacted file would have: the header plus one put record per entry.
    var liveBytes: Int {
        mutating get {
            buildPendingIndex()
            return builtLiveBytes
        }
        set {
            buildPendingIndex()
            builtLiveBytes = newValue
        }
    }
    /// What ``entries`` and ``liveBytes`` hold once built; use those.
    var builtEntries = EntryIndex()
    var builtLiveBytes = LogFormat.headerSize
    /// The data file as opened, checked but not indexed yet; `nil` once ``entries`` is built.
    var pendingIndex: PendingIndex?
    var nextVersion: UInt64 = 0
    var generation: UInt64 = 0
    /// Offset just past the last committed record.
    var end = 0
    /// The data file's format version: a version 1 file is rewritten as the current version
    /// before anything is appended to it.
    var formatVersion = LogFormat.version
    /// The sequence number of the data file's last record (the header's base when it has none).
    var logSequence: UInt64 = 0
    /// The data file's header: where its numbering starts, and how many records at its start are
    /// a snapshot of the file it replaced (see ``LogHeader/snapshotRecords``).
    var baseSequence: UInt64 = 0
    var snapshotRecords: UInt32 = 0
    var seenSequence: UInt64 = 0 {
        didSet { mirror?.store(seenSequence) }
    }
    /// A lock-free copy of `seenSequence`, for the change monitor's cheap "anything new?" check.
    var mirror: SequenceMirror?
    var dataFile: DataFile?
    /// The store's folder, opened again on every full reload.
    var folder: StoreFolder?
    var coordination: CoordinationFile?
    /// Why the last attempt to open failed; `nil` while open or never tried.
    var failure: TinyStorageError?
    /// Damage found and set aside so far.
    var recoveries: [TinyStorage.RecoveryReport] = []
    /// How far bytes other than zeros were seen past the log's end (``end``): the remains of an
    /// append whose process died, or of a disk that lost part of its cache, to be cut off (and
    /// set aside) under the lock before anything is appended; `Int.max` when their end is not
    /// known (up to the file's end), 0 when none were seen. (Seen without the lock, they may
    /// also be an append under way: under the lock, what has become records is kept.)
    var deadTailEnd = 0
    /// Whether ``deadTailEnd`` asks for a look under the lock.
    var mayHaveDeadTail: Bool {
        get { deadTailEnd > end }
        set { deadTailEnd = newValue ? .max : 0 }
    }
    /// Bytes of such remains, cut off under the lock, to be copied to `quarantine/` after it.
    var deadTail: (offset: Int, bytes: [UInt8])?
    /// Data known to be durable that a repair found damaged or missing: reported once, by the
    /// next call that can throw (see `RecoveryReport.isDataLoss`).
    var pendingDataLoss: TinyStorageError?
    /// Messages noted while a lock was held, logged once it is released (see `Engine.withState`).
    var deferredLogs: [DeferredLog] = []
    /// Whether change sets carry the changed keys' values: once a value stream has been opened.
    var changesCarryValues = false
    /// The changes queued for ``Engine/delivery``, under this state's lock (see ``PendingChanges``).
    var pendingChanges = PendingChanges()
    /// Where commits up to ``Engine/recordBufferLimit`` bytes are encoded before they are written,
    /// reused so a commit allocates no buffer.
    var recordBuffer: [UInt8] = []
    /// Linux: the mapping of `dataFile` commits copy their records into (see ``AppendMapping``).
    var appendMapping: AppendMapping?
    /// The log's length from which a commit that leaves it worth compacting asks for a
    /// compaction again; `0` for a file nobody asked about yet.
    ///
    /// NB: while a compaction runs, every commit used to ask for one (about 80 instructions,
    /// for nothing: one was scheduled), and after a failed one (a full disk) every commit started
    /// another. Now one asks, then one every ``Engine/compactionRequestInterval`` of log.
    var nextCompactionRequest = 0

    /// An in-memory store: no files, always open, nothing to catch up with.
    var inMemory = false

    var isOpen: Bool { inMemory || dataFile != nil }
    /// Whether no other process has committed since this state was last brought up to date.
    var isCurrent: Bool { inMemory || coordination?.sequence == seenSequence }

    /// Logs `message` once the engine's lock is released: a logger is never called under a lock.
    mutating func note(
        _ message: String, level: TinyStorageLogLevel, file: String = #fileID, function: String = #function,
        line: Int = #line
    ) {
        deferredLogs.append(DeferredLog(message: message, level: level, file: file, function: function, line: line))
    }
}

/// A message noted under a lock, with the call site that noted it, logged once the lock is released.
struct DeferredLog {
    var message: String
    var level: TinyStorageLogLevel
    var file: String
    var function: String
    var line: Int
}

/// The storage engine: an append-only, checksummed log with an in-memory index.
///
/// All state lives in one ``Locked`` box, entered through ``withState(_:)``. A commit also takes
/// the cross-process lock (see ``CommitLock``: a robust mutex in the lock file's shared page on
/// Linux, `flock(2)` on Apple platforms) for the commit itself only: it catches up
/// with what other processes appended, appends one record with one `pwrite(2)`, and publishes the
/// new length through the shared counter page. Flushes, compaction's rewrite, repairs, user
/// closures and logging all happen with no lock held (see ``LockWitness``). Reads never touch the
/// disk unless another process has committed since the last look, and then read only the new
/// records, without the cross-process lock.
///
/// Lock order: the in-process lock, then the file lock.
final class Engine: Sendable {
    let location: StoreLocation
    let io: FileIO
    let durability: TinyStorage.Durability
    let logger: LogSink
    let nameError: TinyStorageError?
    let state: Locked<EngineState>
    /// Hands changes to the store's listener, in commit order, off the committing thread.
    let delivery: ChangeDelivery
    /// The `.immediate` commits under way, which a flush about to begin waits for (group commit).
    let durableWindow = DurableCommitWindow()
    /// What the state has seen of the shared counter, readable without the engine's lock.
    let mirror = SequenceMirror()
    /// Whether a background compaction is scheduled or running (see ``scheduleCompaction(end:)``).
    let compactionScheduled = Locked(false)
    /// The items whose data protection the store's folders removed, until logged (see
    /// ``noteProtectionRemovals(_:)``). Entered under the state's lock, never the other way round.
    let protectionRemovals = Locked<[ProtectionRemoval]>([])
    /// Notices other processes' commits and replaced files, for the engine's whole life (a reload
    /// or reopen keeps it); `nil` in memory.
    let watcher = Locked<ChangeWatcher?>(nil)

    /// How an engine behaves: its platform's decisions, and where tests need it deterministic.
    struct Options: Sendable {
        /// Whether `.standard` commits are flushed in the background (a timer on another thread).
        var backgroundFlushes = true
        /// Whether the store watches its files for other processes' commits (threads of its own).
        var watchesChanges = true
        /// When background flushes run.
        var flushScheduler = BackgroundScheduler.afterDelay
        /// Where the index of a store just opened is built.
        var indexBuildScheduler = BackgroundScheduler.indexBuilds
        /// Where changes are delivered to the listener: `nil`, a queue of the delivery's own.
        var drainScheduler: BackgroundScheduler?
        /// Whether a commit that leaves the log worth compacting has it compacted on a background
        /// queue (the default) rather than before the commit returns (deterministic, for tests
        /// that crash or inspect the store at a given point).
        var compactsInBackground = true
        /// The platform's decisions (see ``Platform``). Every instance sharing a store must take
        /// the same commit lock, or their locks do not exclude each other.
        var platform = Platform.current
        /// Where the file watch's work runs (see ``ChangeScheduler``): `nil`, a queue of the
        /// store's own, on the real clock; tests give a virtual clock, to tell which look
        /// found a change.
        var changeScheduler: (any ChangeScheduler)?

        /// Whether commits take `flock(2)` and append with `pwrite(2)`, as Apple platforms do,
        /// rather than the robust mutex and mapped appends Linux has: for tests of either path in
        /// one build.
        var usesFileLock: Bool {
            get { platform.commitLock == .fileLock }
            set { platform.commitLock = newValue ? .fileLock : .sharedMutex }
        }

        init(
            backgroundFlushes: Bool = true, watchesChanges: Bool = true,
            flushScheduler: BackgroundScheduler = .afterDelay,
            usesFileLock: Bool? = nil, compactsInBackground: Bool = true, platform: Platform = .current
        ) {
            self.backgroundFlushes = backgroundFlushes
            self.watchesChanges = watchesChanges
            self.flushScheduler = flushScheduler
            self.compactsInBackground = compactsInBackground
            self.platform = platform
            if let usesFileLock { self.usesFileLock = usesFileLock }
        }
    }

    let options: Options

    /// The largest record encoded in the engine's reused buffer; larger ones get their own.
    static let recordBufferLimit = 4096

    /// Compaction waits until the log is at least this large…
    static let minimumCompactionSize = 1 << 20
    /// …and this many times larger than the compacted file would be.
    static let compactionRatio = 4
    /// Once a commit has asked for a compaction, the next asks only after the log has grown this
    /// much more (or a new file replaced it): see ``EngineState/nextCompactionRequest``.
    static let compactionRequestInterval = 64 << 10

    init(
        location: StoreLocation, nameError: TinyStorageError?, durability: TinyStorage.Durability,
        io: FileIO, logger: any TinyStorageLogging, inMemory: Bool = false, options: Options = Options(),
        announcingOn announcingQueue: DispatchQueue = .main
    ) {
        self.options = options
        self.location = location
        self.nameError = nameError
        self.durability = durability
        self.io = io
        self.logger = LogSink(logger)
        self.state = Locked(EngineState())
        self.delivery = ChangeDelivery(
            announcingOn: announcingQueue, pending: PendingChangesInState(state), drains: options.drainScheduler)
        state.withLock { $0.mirror = mirror }
        if inMemory {
            state.withLock { $0.inMemory = true }
            return
        }
        let failure: TinyStorageError? = withState { state in
            do throws(TinyStorageError) {
                try open(&state)
                return nil
            } catch {
                return error
            }
        }
        if let failure { log(failure) }
        guard options.watchesChanges else { return }
        // NB: a queue per store: a look waits for the store's lock, which must not hold up others.
        let queue = DispatchQueue(label: "TinyStorage.changeWatcher", qos: .utility, target: .global(qos: .utility))
        let watcher = ChangeWatcher(
            sources: makeEventSources(), scheduler: options.changeScheduler ?? QueueScheduler(queue: queue),
            look: { [weak self] in self?.filesDidChange() ?? .settled })
        self.watcher.withLock { $0 = watcher }
        watcher.startSoon()
        // NB: a store that could not open looks again now and a little later, in case its file
        // became readable between the failed open and the start of the watch.
        if failure != nil { watcher.receive(.activity) }
    }

    deinit {
        // NB: a background flush may keep the state, and so the lock page, a moment longer; the
        // store is closed now, so other processes may create or take over the lock file.
        state.withLock { $0.coordination }?.leaveStore()
    }

    /// The platform's ways of noticing changes (see ``ChangeEventSource``, ``Platform/FileEvents``).
    private func makeEventSources() -> [any ChangeEventSource] {
        switch options.platform.fileEvents {
        case .namesAndSignal:
            #if os(Linux) || os(Android)
            return [
                SignalEventSource { [weak self] in self?.state.withLock { $0.coordination } },
                InotifyEventSource(directoryPath: location.directoryPath),
            ]
            #else
            return []
            #endif
        case .vnode:
            return [VnodeEventSource(directoryPath: location.directoryPath, dataFilePath: location.dataPath)]
        }
    }

    /// Tells `listener` about every change, local or external, outside all locks.
    func setListener(_ listener: any EngineListener) {
        delivery.setListener(listener)
    }

    /// Queues `change` for the listener and numbers it. Call under the engine's lock, as every
    /// commit and catch-up does: so changes are numbered and delivered in commit order.
    func enqueueChange(_ change: ChangeSet, in state: inout EngineState) {
        if state.pendingChanges.append(change) { delivery.scheduleDrain() }
    }

    /// Queues the change `make` builds, given its number (see ``PendingChanges/append(_:)``).
    @inline(__always)
    func enqueueChange(in state: inout EngineState, _ make: (_ sequence: UInt64) -> ChangeSet) {
        if state.pendingChanges.append(make) { delivery.scheduleDrain() }
    }

    /// Makes every change set from now on carry the values of its keys, not only the keys.
    ///
    /// NB: only value streams read them, so until one is opened commits skip collecting them.
    /// Under the engine's lock, which every commit holds while it builds its change set: a
    /// change numbered after a `delivery.lastSequence` read once this returns carries them.
    func carryValuesInChanges() {
        state.withLock { $0.changesCarryValues = true }
    }

    /// Starts whatever part of the watch could not start before (the store had not opened yet).
    ///
    /// NB: the watch belongs to the engine, not to its state, so reloading or reopening the store
    /// never drops it.
    func startWatching() {
        watcher.withLock { $0 }?.start()
    }

    // MARK: Reading

    /// Gives `body` the current entries: opened if needed, and caught up with other processes.
    func withEntries<R>(_ body: (inout EntryIndex) -> R) throws(TinyStorageError) -> R {
        try withState { (state) throws(TinyStorageError) -> R in
            try prepare(&state)
            return body(&state.entries)
        }
    }

    /// ``withEntries(_:)``, also given the number of the last change queued: the entries reflect
    /// every change numbered up to it, and none numbered after.
    func withEntriesAndLastChange<R>(
        _ body: (inout EntryIndex, _ lastChange: UInt64) -> R
    ) throws(TinyStorageError) -> R {
        try withState { (state) throws(TinyStorageError) -> R in
            try prepare(&state)
            return body(&state.entries, state.pendingChanges.lastSequence)
        }
    }

    /// The value cached for `key` if it was decoded as `type` before, with no decoding; `nil`
    /// sends the caller down the full path (absent, unavailable, not yet decoded…).
    ///
    /// NB: always inlined, with its closure, into `TinyStorage._cachedValue(forKey:type:)`, the
    /// one call a cached read makes into the library (the compiler left the closure a call of
    /// its own): cached `Int` reads measured about 6% faster.
    @inline(__always)
    func cachedValue(forKey key: String, decodedAs type: ObjectIdentifier) -> AnyObject? {
        // NB: the read path's hot spot; it calls nothing out, so it skips `withState`.
        state.withLock { state in
            // A pending data loss sends throwing reads down the full path, which reports it.
            // NB: `builtEntries`, not `entries`: an index not built yet has nothing cached, so
            // the lookup finds nothing and the full path reads the key (without building it).
            guard state.isOpen, state.isCurrent, state.pendingDataLoss == nil,
                let index = state.builtEntries.index(forKey: key)
            else { return nil }
            // NB: the entry is read in place (`_modify`): a getter would copy the entry out,
            // retaining and releasing its bytes and box, a fifth of a cached read. (While a
            // compaction's snapshot shares the index, this copies it once.)
            return Self.box(in: &state.builtEntries[entryAt: index], as: type)
        }
    }

    private static func box(in entry: inout CachedEntry, as type: ObjectIdentifier) -> AnyObject? {
        switch entry.decoded {
        case .boxed(let box, let boxedType) where boxedType == type: box
        case .int(_, let box) where type == ObjectIdentifier(Int.self): box
        default: nil
        }
    }

    /// The `Int` cached for `key`, as ``cachedValue(forKey:decodedAs:)`` is for other types (and
    /// inlined as it is).
    @inline(__always)
    func cachedInt(forKey key: String) -> Int? {
        state.withLock { state in
            guard state.isOpen, state.isCurrent, state.pendingDataLoss == nil,
                let index = state.builtEntries.index(forKey: key)
            else { return nil }
            return Self.int(in: &state.builtEntries[entryAt: index])
        }
    }

    private static func int(in entry: inout CachedEntry) -> Int? {
        guard case .int(let value, _) = entry.decoded else { return nil }
        return value
    }

    /// The value stored for `key` and its version, or `nil` when absent.
    ///
    /// Before the index of a store opened a moment ago is built, the key is looked up in the file
    /// as it was read and checked (see ``PendingIndex``); its version is `nil` then: nothing is
    /// cached for a value no entry holds yet.
    func encodedValue(forKey key: String) throws(TinyStorageError) -> (value: StoredValue, version: UInt64?)? {
        try withState { (state) throws(TinyStorageError) -> (value: StoredValue, version: UInt64?)? in
            try prepare(&state)
            if let pending = state.pendingIndex, pending.isWalkable {
                return pending.value(forKey: key).map { ($0, nil) }
            }
            state.buildPendingIndex()
            return state.builtEntries[key].map { ($0.stored, $0.version) }
        }
    }

    /// Keeps `decoded`, decoded from the entry's bytes at `version`, unless they changed meanwhile.
    func cache(_ decoded: DecodedCache, forKey key: String, version: UInt64) {
        state.withLock { state in
            // NB: `builtEntries`: an index not built yet holds no entry to keep it in.
            guard let index = state.builtEntries.index(forKey: key),
                state.builtEntries[entryAt: index].version == version
            else { return }
            state.builtEntries[entryAt: index].decoded = decoded
        }
    }

    /// Builds the index of a store just opened in the background (``Options/indexBuildScheduler``,
    /// see ``PendingIndex``), from the file as read, without the engine's lock; puts it in place
    /// unless something needed the index meanwhile (and built it itself).
    func buildIndexSoon() {
        options.indexBuildScheduler.schedule { [weak self] in
            guard let self,
                let (pending, version) = state.withLock({ state in state.pendingIndex.map { ($0, state.nextVersion) } })
            else { return }
            let built = pending.build(numberingFrom: version)
            state.withLock { state in
                guard state.pendingIndex === pending else { return }
                state.pendingIndex = nil
                (state.builtEntries, state.builtLiveBytes, state.nextVersion) = built
            }
        }
    }

    /// The data loss a repair found and no throwing read has reported yet; reported once. Opens
    /// and catches up first, so a loss found now is reported now.
    func takePendingDataLoss() -> TinyStorageError? {
        withState { state in
            try? prepare(&state)
            defer { state.pendingDataLoss = nil }
            return state.pendingDataLoss
        }
    }

    /// Why the store cannot be used right now, after one more attempt to open it; `nil` when it can.
    func currentFailure() -> TinyStorageError? {
        withState { state in
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
    /// `build` must be the engine's own code: it runs while the cross-process lock is held. (User
    /// closures run before, see `TinyStorage.update`.) After the locks are released, an
    /// `.immediate` commit is flushed before this returns, and a log grown past its live data is
    /// compacted.
    ///
    /// - Returns: `build`'s result.
    /// - Throws: `.unavailable` when the store cannot be opened, system errors from the append,
    ///   and whatever `build` throws: nothing is written then. `.io` when an `.immediate` commit's
    ///   flush fails: the commit is in the file then (other processes may already read it) but
    ///   not known to be on stable storage.
    func commit<Result>(
        _ build: (EntryIndex) throws(TinyStorageError) -> Plan<Result>
    ) throws(TinyStorageError) -> Result {
        var committed: CommittedAppend?
        var hasDeadTail = false
        var outcome: Result?
        // NB: in the window until appended (or failed), so a flush about to begin waits for it.
        let ticket = durability == .immediate ? durableWindow.enter() : nil
        defer { ticket?.leave() }
        var needsNewFormat = false
        var attempts = 0
        while outcome == nil {
            if needsNewFormat {
                attempts += 1
                guard attempts <= 8 else {
                    throw TinyStorageError(
                        .io,
                        "The data file '\(location.dataPath)' could not be rewritten in the current format; try again.")
                }
                try compactNow()
                needsNewFormat = false
            }
            outcome = try withState { (state) throws(TinyStorageError) -> Result? in
                try ensureOpen(&state)
                // NB: catching up (and reloading a replaced file) happens here, without the file lock;
                // under it, only what raced in since. If the file was replaced meanwhile, start over.
                if !state.isCurrent { try bringUpToDate(&state) }
                // NB: the index of a store opened a moment ago is built here, before the file lock,
                // not under it (the build below is then a check that finds it built).
                state.buildPendingIndex()
                // NB: a file of an older format is upgraded before anything is appended to it.
                let appending = state.formatVersion == LogFormat.version
                var appended = false
                defer {
                    if appended {
                        ticket?.leave()
                        committed = afterAppend(&state)
                    }
                }
                return try withFileLock(&state, appending: appending) { (state) throws(TinyStorageError) -> Result? in
                    if !holdsEveryRecord(state), try !catchUpUnderLock(&state) { return nil }
                    if state.mayHaveDeadTail {
                        try cutDeadTail(&state)
                        hasDeadTail = state.deadTail != nil
                    }
                    // NB: the plan is built from the stored entries, so the index must be built (it
                    // is, unless what raced in under the lock reloaded the file: then it is now).
                    state.buildPendingIndex()
                    var plan = try build(state.builtEntries)
                    // NB: moved out of the plan (`take`), not copied.
                    guard var commit = plan.commit.take() else { return plan.result }
                    // NB: every API checks its writeID first; this keeps a longer one out of the format.
                    _ = try TinyStorage.validatedWriteID(commit.writeID)
                    // NB: a file only ever holds records of its header's version, so an old file is
                    // first rewritten in the current format, by a compaction, then appended to.
                    if state.formatVersion != LogFormat.version, !state.inMemory {
                        needsNewFormat = true
                        return nil
                    }
                    commit.sequence = state.logSequence + 1
                    try append(commit, to: &state)
                    // NB: enqueued under the lock, so changes are delivered in commit order.
                    if let change = apply(commit, to: &state, isExternal: false) { enqueueChange(change, in: &state) }
                    appended = true
                    return plan.result
                }
            }
        }
        // NB: `outcome` is set: the loop ends only then.
        guard let result = outcome else { throw TinyStorageError(.io, "The commit did not run.") }
        if hasDeadTail { withState { setAsideDeadTail(&$0) } }
        if let committed { try finishCommit(committed) }
        return result
    }

    /// What is left of a commit once both locks are released.
    struct CommittedAppend {
        /// An `.immediate` commit's flush.
        var flush: AppendedCommit?
        /// The log's length, when it has grown worth compacting.
        var compactionEnd: Int?
    }

    /// After a commit appended to `state`'s file: wakes the other processes' watches, and
    /// schedules a `.standard` commit's flush (within ``DataFile/backgroundFlushDelay``); both
    /// cheap, so done here, under the engine's lock with the file lock released.
    ///
    /// NB: what must wait until no lock is held (an `.immediate` commit's flush, a compaction) is
    /// returned; most commits have neither, and then no reference to the files leaves the lock:
    /// carrying three out, to release them after, was a tenth of an overwrite.
    ///
    /// - Returns: `nil` when nothing is left (always in memory).
    func afterAppend(_ state: inout EngineState) -> CommittedAppend? {
        // NB: each path takes only the references it uses (each taken is retained and released).
        guard state.dataFile != nil, state.coordination != nil, state.folder != nil else { return nil }
        state.coordination?.signalChange()
        var compactionEnd: Int?
        if state.end >= state.nextCompactionRequest, Self.shouldCompact(end: state.end, liveBytes: state.builtLiveBytes)
        {
            state.nextCompactionRequest = state.end + Self.compactionRequestInterval
            compactionEnd = state.end
        }
        guard durability == .standard else {
            guard let file = state.dataFile, let coordination = state.coordination, let folder = state.folder else {
                return nil
            }
            let appended = AppendedCommit(
                file: file, end: state.end, generation: state.generation, coordination: coordination, folder: folder,
                marksDurability: state.formatVersion >= 2)
            return CommittedAppend(flush: appended, compactionEnd: compactionEnd)
        }
        if options.backgroundFlushes, state.dataFile?.requestBackgroundSync(through: state.end) == true,
            let file = state.dataFile
        {
            let generation = state.generation
            let marksDurability = state.formatVersion >= 2
            let verifiedEnd = verifiedEnd(of: generation)
            file.startBackgroundSync(logger: logger, appendedThrough: verifiedEnd) { end in
                if marksDurability { file.recordDurableMark(through: end, flushesLater: true) }
            }
        }
        return compactionEnd.map { CommittedAppend(flush: nil, compactionEnd: $0) }
    }

    /// How far this process has verified the log of the file of `generation`, asked when called
    /// (under the engine's lock); 0 once the file was replaced. What a flush reaches for and
    /// records as durable: never the lock page's length, which may claim more than the file holds.
    ///
    /// NB: asked as a flush begins, so it covers every commit of this process made by then (see
    /// `DataFile.requestBackgroundSync`): a commit sets the end, then looks whether a flush is
    /// scheduled, both under the engine's lock.
    func verifiedEnd(of generation: UInt64) -> @Sendable () -> Int {
        { [state] in state.withLock { $0.generation == generation && $0.dataFile != nil ? $0.end : 0 } }
    }

    /// With no lock held: what ``afterAppend(_:)`` left. An `.immediate` commit is flushed,
    /// sharing one flush with concurrent commits; a log grown worth compacting is compacted.
    func finishCommit(_ committed: CommittedAppend) throws(TinyStorageError) {
        if let appended = committed.flush { try flush(appended) }
        if let end = committed.compactionEnd { scheduleCompaction(end: end) }
    }

    /// Where a commit was appended, for its flush.
    ///
    /// NB: a class, so a ``CommittedAppend`` is two words that every commit copies cheaply; a
    /// struct of four references made each copy and destruction an out-of-line call, on every
    /// commit, for the `.immediate` ones that need it.
    final class AppendedCommit {
        let file: DataFile
        let end: Int
        let generation: UInt64
        let coordination: CoordinationFile
        let folder: StoreFolder
        /// Whether the file records how far it is durable (format version 2).
        let marksDurability: Bool

        init(
            file: DataFile, end: Int, generation: UInt64, coordination: CoordinationFile, folder: StoreFolder,
            marksDurability: Bool
        ) {
            self.file = file
            self.end = end
            self.generation = generation
            self.coordination = coordination
            self.folder = folder
            self.marksDurability = marksDurability
        }
    }

    /// Flushes `appended.file` through `appended.end`, then records how far it is durable. No
    /// lock is held. A file that a compaction or repair just renamed into place has its name
    /// flushed too (the directory synced), or a power loss could bring the old file back.
    private func flush(_ appended: AppendedCommit) throws(TinyStorageError) {
        let coordination = appended.coordination
        do throws(Errno) {
            try appended.file.sync(through: appended.end, appendedThrough: verifiedEnd(of: appended.generation)) {
                durableWindow.gather()
            }
            let inode = appended.file.inode
            if inode.map({ !coordination.isNameDurable(ofFileWithInode: $0) }) ?? true {
                try appended.folder.sync().get()
                if let inode { coordination.recordNameDurable(ofFileWithInode: inode) }
            }
        } catch {
            let failure =
                FileIO.flushUnsupported.contains(error)
                ? TinyStorageError(
                    .io,
                    "The change was written, but the file system of '\(location.directoryPath)' cannot flush to "
                        + "stable storage (\(error)), so nothing there can be made durable: .immediate commits and "
                        + "synchronize() fail. Use .standard durability, or keep the store on the device's own disk.",
                    underlying: error)
                : TinyStorageError(
                    .io,
                    "The change was written, but flushing it to stable storage failed, so it may not survive a "
                        + "power loss. Check the disk; the next durable commit flushes again.",
                    underlying: error)
            log(failure)
            throw failure
        }
        if appended.marksDurability {
            appended.file.recordDurableMark(through: appended.end, flushesLater: options.backgroundFlushes)
        }
    }

    /// Flushes everything committed so far (see `TinyStorage.synchronize()`).
    func synchronize() throws(TinyStorageError) {
        let target = try withState { (state) throws(TinyStorageError) -> AppendedCommit? in
            if state.inMemory { return nil }
            try prepare(&state)
            guard let file = state.dataFile, let coordination = state.coordination, let folder = state.folder else {
                return nil
            }
            return AppendedCommit(
                file: file, end: state.end, generation: state.generation, coordination: coordination, folder: folder,
                marksDurability: state.formatVersion >= 2)
        }
        guard let target else { return }
        try flush(target)
        // NB: and the durable mark the flush wrote: from here on, losing anything committed so
        // far is reported as data loss, not taken for a power loss.
        do throws(Errno) {
            if target.marksDurability {
                try target.file.recordDurableMark(through: target.end, flushesLater: false).get()
                try target.file.syncDurableMark()
            }
        } catch {
            let failure = TinyStorageError(
                .io, "Everything committed is on stable storage, but recording so in the file failed. Check the disk.",
                underlying: error)
            log(failure)
            throw failure
        }
    }

    // MARK: Internals

    func log(_ error: TinyStorageError, file: String = #fileID, function: String = #function, line: Int = #line) {
        logger.log(.error, error.description, file: file, function: function, line: line)
    }

    /// Opens the store if needed, then catches up when another process has committed.
    func prepare(_ state: inout EngineState) throws(TinyStorageError) {
        try ensureOpen(&state)
        if !state.isCurrent { try bringUpToDate(&state) }
    }

    /// Catches up with other processes (see `catchUpOrReload`); a failure makes the store
    /// unavailable for this call: it never answers, nor writes, from a state it could not bring
    /// up to date.
    func bringUpToDate(_ state: inout EngineState) throws(TinyStorageError) {
        do throws(TinyStorageError) {
            try catchUpOrReload(&state)
        } catch {
            throw error.code == .unavailable ? error : unavailable(error)
        }
    }

    func ensureOpen(_ state: inout EngineState) throws(TinyStorageError) {
        if state.isOpen { return }
        let previous = state.failure
        do throws(TinyStorageError) {
            try open(&state)
            if previous != nil {
                state.note("Store at \(location.directoryPath) is available again.", level: .notice)
                // Everything "changed" for whoever saw the store unavailable.
                let keys = Array(state.entries.keys)
                if !keys.isEmpty {
                    let values = keys.map { state.entries[$0]?.stored }
                    enqueueChange(
                        ChangeSet(keys: SmallList(keys), values: values, writeID: nil, isExternal: true), in: &state)
                }
            }
        } catch {
            if previous?.code != error.code { state.note(error.description, level: .error) }
            throw error
        }
    }

    func unavailable(_ cause: TinyStorageError) -> TinyStorageError {
        TinyStorageError(
            .unavailable,
            "The store at '\(location.directoryPath)' cannot be read right now, so TinyStorage will "
                + "neither answer from it nor write to it. \(cause.message)",
            underlying: cause)
    }

    /// Appends one record at `state.end` and publishes it. Call under the file lock.
    ///
    /// NB: the usual case, a record that fits in the file's mapping, takes no reference to the
    /// files out of `state`: each one bound across the append was retained and released, 80
    /// instructions of an overwrite's 2,950.
    ///
    /// - Returns: Whether the record was copied into `state.appendMapping` (else written with
    ///   `pwrite`, or kept in memory only).
    @inline(__always)
    @discardableResult
    func append(_ record: some LogRecord, to state: inout EngineState) throws(TinyStorageError) -> Bool {
        if state.inMemory { return false }
        let size = record.encodedSize
        let end = state.end
        let mapped: Bool
        // NB: called through the optionals, not bound: a bound reference was retained and released.
        if state.appendMapping?.covers(state.dataFile, through: end + size) == true {
            if case .failure(let error)? = state.appendMapping?.write(record, at: end, size: size) {
                throw .system(error, "append to", path: location.dataPath)
            }
            state.end = end + size
            mapped = true
        } else {
            mapped = try appendOutsideMapping(record, size: size, to: &state)
        }
        guard let sequence = state.coordination?.publish(generation: state.generation, length: state.end) else {
            throw TinyStorageError(.unavailable, "The store is not open.")
        }
        state.seenSequence = sequence
        return mapped
    }

    /// ``append(_:to:)`` for a record the current mapping cannot take: maps more of the file
    /// (or maps it first), or writes with `pwrite` where commits do not append through a mapping.
    ///
    /// - Returns: Whether the record was copied into the mapping.
    private func appendOutsideMapping(
        _ record: some LogRecord, size: Int, to state: inout EngineState
    ) throws(TinyStorageError) -> Bool {
        guard let file = state.dataFile, let coordination = state.coordination else {
            throw TinyStorageError(.unavailable, "The store is not open.")
        }
        if appendsThroughMapping(file, coordination) {
            try appendThroughMapping(record, size: size, to: file, &state)
            return true
        } else {
            try appendWithWrite(record, size: size, to: file, &state)
            return false
        }
    }

    /// Whether commits to `file` copy their records into a mapping of it: where the commit lock
    /// reports dead holders (so nothing past the committed length needs a look) and the file
    /// system writes allocated space in place (see ``AppendMapping``). Every process sharing the
    /// file answers the same; then none ever makes it shorter.
    func appendsThroughMapping(_ file: DataFile, _ coordination: CoordinationFile) -> Bool {
        coordination.reportsDeadHolders && file.allowsMappedAppends
    }

    /// Copies the record into the file's mapping (see ``AppendMapping``), first allocating more
    /// of the file, or mapping it (again, when it has outgrown the address space reserved),
    /// when the mapping does not reach that far.
    private func appendThroughMapping(
        _ record: some LogRecord, size: Int, to file: DataFile, _ state: inout EngineState
    ) throws(TinyStorageError) {
        let end = state.end + size
        var madeRoom = false
        if let mapping = state.appendMapping, mapping.file === file {
            switch mapping.makeRoom(through: end) {
            case .success(let done): madeRoom = done
            case .failure(let error): throw .system(error, "make room for the change in", path: location.dataPath)
            }
        }
        if !madeRoom {
            state.appendMapping = nil  // NB: unmapped before the file is mapped again
            switch AppendMapping.make(for: file, from: state.end, through: end, io: io) {
            case .success(let mapping): state.appendMapping = mapping
            case .failure(let error): throw .system(error, "make room for the change in", path: location.dataPath)
            }
        }
        if case .failure(let error) = state.appendMapping?.write(record, at: state.end, size: size) {
            throw .system(error, "append to", path: location.dataPath)
        }
        state.end += size
    }

    /// Writes the record with `pwrite(2)`, removing whatever part of it reached the file when
    /// that fails.
    private func appendWithWrite(
        _ record: some LogRecord, size: Int, to file: DataFile, _ state: inout EngineState
    )
        throws(TinyStorageError)
    {
        let end = state.end
        let written: Result<Void, Errno>
        if size <= Self.recordBufferLimit {
            if state.recordBuffer.count < size {
                state.recordBuffer = [UInt8](repeating: 0, count: Self.recordBufferLimit)
            }
            written = state.recordBuffer.withUnsafeMutableBytes { raw in
                let buffer = UnsafeMutableRawBufferPointer(rebasing: raw[..<size])
                record.write(into: buffer)
                return io.write(file.fd, UnsafeRawBufferPointer(buffer), at: end)
            }
        } else {
            written = record.encoded().withUnsafeBytes { io.write(file.fd, $0, at: end) }
        }
        if case .failure(let error) = written {
            // NB: remove whatever part of the record reached the file so a later open cannot see
            // a commit we reported as failed (flushed once the lock is let go, before the error
            // is thrown: see `cutOff`, which every cut goes through).
            if let coordination = state.coordination {
                _ = cutOff(from: 0, in: file, holding: [], coordination, at: end)
            }
            throw .system(error, "append to", path: location.dataPath)
        }
        state.end += size
    }

    /// Applies a verified commit to the in-memory state.
    ///
    /// - Parameter collectChanges: `false` while loading a file, when nobody needs the keys.
    /// - Returns: the keys whose bytes changed, or `nil` when none did (or none were collected).
    @discardableResult
    func apply(
        _ commit: LogCommit, to state: inout EngineState, isExternal: Bool, collectChanges: Bool = true
    ) -> ChangeSet? {
        // NB: built once here (a commit or catch-up right after the open), then the stored
        // entries are used: through the `entries` accessor each access cost a check and a copy.
        state.buildPendingIndex()
        var changed = SmallList<String>()
        var values: [StoredValue?] = []
        let collectValues = collectChanges && state.changesCarryValues
        if commit.clearsFirst {
            if collectChanges {
                changed.append(contentsOf: state.builtEntries.keys)
                if collectValues { values = Array(repeating: nil, count: changed.count) }
            }
            state.builtEntries.removeAll()
            state.builtLiveBytes = LogFormat.headerSize
        }
        if commit.sequence != 0 { state.logSequence = commit.sequence }
        // NB: by index, here and where records are sized and written: iterating a SmallList copies
        // it (its element and its array), which cost a tenth of an overwrite.
        for index in commit.operations.indices {
            switch commit.operations[index] {
            case .put(let key, let value, let kind):
                let keyLength = key.utf8.count
                state.nextVersion &+= 1
                // NB: the operation's `Data` is wrapped, not copied (see ``ValueBytes``).
                let bytes = ValueBytes(value)
                let entry = CachedEntry(bytes: bytes, version: state.nextVersion, kind: kind)
                if let old = state.builtEntries.updateValue(entry, forKey: key) {
                    if old.kind == kind, old.bytes == bytes {
                        state.builtEntries[key] = old  // unchanged: keep the decoded value
                        continue
                    }
                    state.builtLiveBytes -= LogCommit.putRecordSize(keyLength: keyLength, valueLength: old.bytes.count)
                }
                state.builtLiveBytes += LogCommit.putRecordSize(keyLength: keyLength, valueLength: value.count)
                if collectChanges {
                    changed.append(key)
                    if collectValues { values.append(StoredValue(bytes, kind: kind)) }
                }
            case .remove(let key):
                guard let old = state.builtEntries.removeValue(forKey: key) else { continue }
                state.builtLiveBytes -= LogCommit.putRecordSize(keyLength: key.utf8.count, valueLength: old.bytes.count)
                if collectChanges {
                    changed.append(key)
                    if collectValues { values.append(nil) }
                }
            }
        }
        guard !changed.isEmpty else { return nil }
        if commit.clearsFirst || commit.operations.count > 1 {
            // Keep each key once, with its last value.
            var last: [String: Int] = [:]
            for (index, key) in changed.enumerated() { last[key] = index }
            let keep = changed.indices.filter { last[changed[$0]] == $0 }
            changed = SmallList(keep.map { changed[$0] })
            if collectValues { values = keep.map { values[$0] } }
        }
        return ChangeSet(keys: changed, values: values, writeID: commit.writeID, isExternal: isExternal)
    }

    // MARK: File events

    /// Called by the change watcher: catch up with other processes' commits, or try to open a
    /// store that was unavailable, so observers hear about it within milliseconds.
    func filesDidChange() -> LookFinding {
        // NB: many events come from this process's own commits; answering those without the
        // engine's lock keeps the watcher from contending with writers and readers.
        if !mirror.isCurrent {
            withState { state in
                do throws(TinyStorageError) {
                    try prepare(&state)
                } catch {
                    // Reported through availability and the next call.
                }
            }
        }
        // NB: where commits are signalled (Linux), a file event is no commit's; where they are
        // not (Apple platforms' vnode events), every commit makes one, and a settled file spares
        // four later wake-ups.
        guard options.platform.fileEvents == .vnode else { return .unsettled }
        let log = withState { state -> (file: DataFile, end: Int)? in
            guard state.failure == nil, let file = state.dataFile, let coordination = state.coordination,
                !coordination.reportsDeadHolders || file.allowsMappedAppendsIfKnown == false
            else { return nil }
            return (file, state.end)
        }
        // NB: appended with `pwrite`, a record makes the file longer before it is published:
        // nothing past the log read means no writer is between the two.
        guard let log, case .success(let status) = io.status(log.file.fd), status.size <= log.end else {
            return .unsettled
        }
        return .settled
    }
}

/// The engine's state as the lock of its delivery's pending changes (see ``PendingChanges``).
final class PendingChangesInState: PendingChangesLock {
    private let state: Locked<EngineState>

    init(_ state: Locked<EngineState>) {
        self.state = state
    }

    func withPendingChanges<R>(_ body: (inout PendingChanges) -> R) -> R {
        state.withLock { body(&$0.pendingChanges) }
    }

    func everyKey() -> [(key: String, value: StoredValue?)] {
        state.withLock { state in state.entries.map { (key: $0.key, value: $0.value.stored) } }
    }
}
