import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The storage engine: an append-only, checksummed log with an in-memory index.
///
/// All state lives in one ``Locked`` box of ``EngineState`` (one value per component: the log,
/// the index, what of the lock page was seen, recovery, queued changes), entered through
/// ``withState(_:)``. A commit (``commit(_:)``, Commit/Engine+Commit.swift) also takes the
/// cross-process lock (see ``CommitLock``: a robust mutex in the lock file's shared page on
/// Linux, `flock(2)` on Apple platforms) for the commit itself only: it makes sure it holds every
/// record of the data file, appends one record, and publishes the new length through the lock
/// page. A commit's flush, compaction's rewrite, user code and logging happen with neither lock
/// held; a repair and a new file's creation hold the engine's lock, never the commit lock but to
/// put their file in place (see ``LockWitness``, and ``EngineState`` for the rules). Reads never
/// touch the disk unless another process has committed since the last look, and then read only
/// the new records, without the cross-process lock.
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
        /// Whether the store only reads (``TinyStorage/Access/readOnly``): it creates and writes no
        /// file, not even `store.lock`, takes no lock but the folder's shared presence lock, and
        /// refuses every write with ``TinyStorageError/Code/readOnly`` before it starts. What would
        /// need a writer (a missing file, a repair) leaves it unavailable until one has come.
        var readOnly = false
        /// The read permission the store's new folder and files give group or others
        /// (``TinyStorage/Readers``): `0` (owner-only), `0o040` or `0o044`.
        var sharedReading: mode_t = 0
        /// The platform's decisions (see ``Platform``). Every instance sharing a store must take
        /// the same commit lock, or their locks do not exclude each other.
        var platform = Platform.current
        /// Where the file watch's work runs (see ``ChangeScheduler``): `nil`, a queue of the
        /// store's own, on the real clock; tests give a virtual clock, to tell which look
        /// found a change.
        var changeScheduler: (any ChangeScheduler)?
        /// The wall clock values expire by, and how the store is woken to announce that they did
        /// (see ``ExpiryClock``): the system's, unless a test gives its own.
        var clock = ExpiryClock.system

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
    /// much more (or a new file replaced it): see ``LogState/nextCompactionRequest``.
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
            announcingOn: announcingQueue, pending: PendingChangesInState(state, clock: options.clock),
            drains: options.drainScheduler)
        let openedAt = options.clock.now()
        state.withLock { state in
            state.coordination.mirror = mirror
            // NB: what had expired before this instance first read the store was never seen here.
            state.expiry.announcedThrough = openedAt
        }
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
        state.withLock { $0.coordination.file }?.leaveStore()
    }

    /// The platform's ways of noticing changes (see ``ChangeEventSource``, ``Platform/FileEvents``).
    private func makeEventSources() -> [any ChangeEventSource] {
        switch options.platform.fileEvents {
        case .namesAndSignal:
            #if os(Linux) || os(Android)
            return [
                SignalEventSource(polling: options.readOnly) { [weak self] in
                    self?.state.withLock { $0.coordination.file }
                },
                InotifyEventSource(directoryPath: location.directoryPath),
            ]
            #else
            return []
            #endif
        case .vnode:
            return [VnodeEventSource(directoryPath: location.directoryPath, dataFilePath: location.dataPath)]
        }
    }

    /// Starts whatever part of the watch could not start before (the store had not opened yet).
    ///
    /// NB: the watch belongs to the engine, not to its state, so reloading or reopening the store
    /// never drops it.
    func startWatching() {
        watcher.withLock { $0 }?.start()
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
        let previous = state.recovery.failure
        do throws(TinyStorageError) {
            try open(&state)
            if previous != nil {
                state.note("Store at \(location.directoryPath) is available again.", level: .notice)
                // Everything "changed" for whoever saw the store unavailable.
                let keys = Array(state.index.entries.keys)
                if !keys.isEmpty {
                    let live = LiveEntries(state.index.entries, clock: options.clock)
                    let values = keys.map { live[$0]?.stored }
                    enqueueChange(
                        ChangeSet(keys: SmallList(keys), values: values, writeID: nil, isExternal: true), in: &state)
                }
            }
        } catch {
            if previous?.code != error.code { state.note(error.description, level: .error) }
            throw error
        }
    }

    /// The error every write to a read-only store throws, before anything is done.
    var readOnlyRefusal: TinyStorageError {
        TinyStorageError(
            .readOnly,
            "The store at '\(location.directoryPath)' was opened read-only (access: .readOnly), so it writes "
                + "nothing; nothing was written. Open it with access: .readWrite (and write permission) to change it.")
    }

    /// Why a read-only store cannot be read yet: `what` only a process that may write it can do.
    func needsWriter(_ what: String) -> TinyStorageError {
        TinyStorageError(
            .unavailable,
            "The store at '\(location.directoryPath)' is opened read-only, and \(what): only a process that may "
                + "write the store can change that. It is read once one has; this store looks again when its files change."
        )
    }

    func unavailable(_ cause: TinyStorageError) -> TinyStorageError {
        TinyStorageError(
            .unavailable,
            "The store at '\(location.directoryPath)' cannot be read right now, so TinyStorage will "
                + "neither answer from it nor write to it. \(cause.message)",
            underlying: cause)
    }

}
