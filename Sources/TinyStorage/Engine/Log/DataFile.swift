import CTinyStorageShims
import Dispatch
import Foundation

/// Runs the engine's background work — a flush, an index build — later, on a queue; or, in crash
/// tests and the deterministic simulation, when the test decides (so a crash can come in the
/// middle of one, and no thread outside the simulation's schedule takes the engine's lock).
struct BackgroundScheduler: Sendable {
    let schedule: @Sendable (_ work: @escaping @Sendable () -> Void) -> Void

    /// Background flushes: after ``DataFile/backgroundFlushDelay`` on a global queue.
    static let afterDelay = BackgroundScheduler { flush in
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + DataFile.backgroundFlushDelay, execute: flush)
    }

    /// Index builds: one at a time, whichever store they are for (see `Engine.buildIndexSoon()`).
    static let indexBuilds = BackgroundScheduler { build in indexBuildQueue.async(execute: build) }

    /// The queue of ``indexBuilds`` (tests hold it).
    static let indexBuildQueue = DispatchQueue(label: "TinyStorage.indexBuild", qos: .utility)
}

/// An open data file and the bookkeeping of how much of it is on stable storage.
///
/// Reference-counted so a flush can run after the engine's lock is released even if a compaction
/// replaces the file meanwhile: the descriptor stays open until the last user lets go.
final class DataFile: @unchecked Sendable {
    // @unchecked: `mappedAppendsAnswer` and `backgroundScheduled` are accessed only through
    // atomic loads and stores; every other property is `Sendable`.
    let fd: Int32
    private let io: FileIO
    /// What ``allowsMappedAppends`` found: 0 before it was asked, then 1 (no) or 2 (yes).
    private let mappedAppendsAnswer: UnsafeMutablePointer<UInt64>
    /// 1 from when a commit schedules a background flush until that flush begins, else 0 (see
    /// ``requestBackgroundSync(through:)``).
    private let backgroundScheduled: UnsafeMutablePointer<UInt64>
    private let scheduler: BackgroundScheduler

    /// Flushes of the file, one at a time, shared by the commits that wait for them.
    private let turns: FlushTurns

    /// The header's durable mark. NB: a lock of its own, never held across a flush: a commit
    /// whose data a flush already covered writes its mark without waiting for the next flush.
    private struct Marks {
        /// The largest end written into the header's durable mark by this instance (or seen there),
        /// and the largest such end a later flush carried to stable storage.
        var written = 0
        var synced = 0
        var flushScheduled = false
    }

    private let marks = Locked(Marks())

    /// What commits ask of flushes. NB: a lock of its own, never held during a flush: a
    /// `.standard` commit must not wait for the disk, nor a durable one that a finished flush
    /// covered, and a flush takes as long as `fdatasync` does.
    private struct Requests {
        /// The furthest end a durable commit asked to flush, registered before it waits for the
        /// flush: its bytes are written by then, so a flush that begins later covers them too.
        var announcedThrough = 0
    }

    private let requests: Locked<Requests>
    /// For tests: the furthest end a durable commit registered.
    var announcedEnd: Int { requests.withLock { $0.announcedThrough } }

    /// How long a `.standard` commit may stay in the OS cache before TinyStorage flushes it.
    static let backgroundFlushDelay: DispatchTimeInterval = .seconds(1)

    init(fd: Int32, io: FileIO, syncedThrough: Int = 0, scheduler: BackgroundScheduler = .afterDelay) {
        self.fd = fd
        self.io = io
        self.mappedAppendsAnswer = .allocate(capacity: 1)
        mappedAppendsAnswer.initialize(to: 0)
        self.backgroundScheduled = .allocate(capacity: 1)
        backgroundScheduled.initialize(to: 0)
        self.scheduler = scheduler
        self.turns = FlushTurns(syncedThrough: syncedThrough)
        self.requests = Locked(Requests())
    }

    deinit {
        mappedAppendsAnswer.deallocate()
        backgroundScheduled.deallocate()
        io.close(fd)
    }

    /// The file's inode (`fstat(2)`), which tells it from a file put in its place; `nil` when it
    /// cannot be asked.
    var inode: UInt64? {
        guard case .success(let status) = io.status(fd) else { return nil }
        return status.inode
    }

    /// Whether its file system lets commits append through a mapping (see
    /// ``AppendMapping/isSafe(for:io:)``), asked once (`fstatfs(2)`), when first wanted.
    ///
    /// NB: not when the file is opened: most opens only read, and the answer cannot change,
    /// since it depends on the file's file system alone. So every process sharing the file
    /// still answers the same, whenever it asks, and a process asks before it first appends
    /// (or cuts: see `Engine.appendsThroughMapping`). The first answer stored is the answer for
    /// the file's life here, as it was when asked at open: two threads asking at once may both
    /// ask the system, but only one answer is kept.
    var allowsMappedAppends: Bool {
        var answer = ts_atomic_load_u64(mappedAppendsAnswer)
        if answer == 0 {
            let asked: UInt64 = AppendMapping.isSafe(for: fd, io: io) ? 2 : 1
            answer =
                ts_atomic_compare_exchange_u64(mappedAppendsAnswer, 0, asked)
                ? asked : ts_atomic_load_u64(mappedAppendsAnswer)
        }
        return answer == 2
    }

    /// ``allowsMappedAppends`` if it was asked already (a commit asks), else `nil`: for a look,
    /// which must not make the open's system calls it was spared.
    var allowsMappedAppendsIfKnown: Bool? {
        switch ts_atomic_load_u64(mappedAppendsAnswer) {
        case 0: nil
        case let answer: answer == 2
        }
    }

    /// Flushes the file unless bytes up to `end` are already on stable storage (`fdatasync(2)`,
    /// `fcntl(F_FULLFSYNC)`).
    ///
    /// Commits waiting while another flush runs share the next one (group commit): it covers
    /// every commit appended before it began, not only the caller's.
    ///
    /// - Parameters:
    ///   - appendedThrough: How far the file is appended and verified right now (see
    ///     `Engine.verifiedEnd(of:)`): read as the flush begins, everything before it is in the
    ///     page cache and reaches stable storage with the flush, whether its commit has come to
    ///     wait for a flush yet or not. 0 when unknown (the file was replaced).
    ///   - gather: Called when this call's flush is about to begin, to wait for commits on
    ///     their way (see ``DurableCommitWindow``).
    func sync(through end: Int, appendedThrough: () -> Int = { 0 }, gather: () -> Void = {}) throws(Errno) {
        requests.withLock { $0.announcedThrough = max($0.announcedThrough, end) }
        // NB: a commit a finished flush covered returns without waiting for the one under way
        // (see `FlushTurns`). Commits still on their way here (the threads a flush wakes commit
        // again at once) are covered too: waiting commits alone made 4 threads' durable commits
        // only 1.3 times as many as 1 thread's.
        _ = try turns.flush(covering: end, gather: gather) {
            max(requests.withLock { $0.announcedThrough }, appendedThrough())
        } _: {
            flushFile()
        }.get()
    }

    /// Flushes the header's durable mark, unless a flush since it was last written already did
    /// (see `TinyStorage.synchronize()`: afterwards, losing anything before the current end is
    /// reported as data loss).
    func syncDurableMark() throws(Errno) {
        try flushMarkIfPending().get()
    }

    /// Flushes, in a turn of its own, if a mark was written that no flush has carried yet.
    private func flushMarkIfPending() -> Result<Void, Errno> {
        turns.flush(covering: nil) {
            0
        } _: {
            marksPending ? flushFile() : .success(())
        }.map { _ in }
    }

    /// Whether a mark was written that no flush has carried to stable storage yet.
    private var marksPending: Bool { marks.withLock { $0.synced < $0.written } }

    /// `fdatasync(2)`; a mark written before it began is on stable storage when it returns. Call
    /// in a turn of ``turns``.
    private func flushFile() -> Result<Void, Errno> {
        let mark = marks.withLock { $0.written }
        let result = io.sync(fd, dataOnly: true)
        if case .success = result { marks.withLock { $0.synced = max($0.synced, mark) } }
        return result
    }

    /// Records in the header (version 2) that the file is on stable storage through `end`: two
    /// `pread`/`pwrite` calls, after the flush that got it there (nothing is written when the
    /// mark already says as much). The mark itself reaches stable storage with the next flush, so
    /// it never claims more than what is durable; with `flushesLater`, that flush comes within
    /// ``backgroundFlushDelay`` if no other comes first. After commits this is best effort: a
    /// mark that could not be written only makes a later recovery more cautious.
    @discardableResult
    func recordDurableMark(through end: Int, flushesLater: Bool) -> Result<Void, Errno> {
        let result = marks.withLock { (marks) -> Result<Void, Errno> in
            // NB: marks only grow, so one this instance wrote or saw that far is still there.
            if marks.written >= end { return .success(()) }
            let head: [UInt8]
            switch io.read(fd, count: LogFormat.headerSize, at: 0) {
            case .success(let bytes) where bytes.count == LogFormat.headerSize: head = bytes
            case .success: return .failure(.ioError)  // NB: a version 2 file is never shorter than its header
            case .failure(let error): return .failure(error)
            }
            let slots = head.withUnsafeBytes { raw in
                (LogHeader.slotValue(in: raw, slot: 0), LogHeader.slotValue(in: raw, slot: 1))
            }
            let marked = max(slots.0 ?? 0, slots.1 ?? 0)
            guard end > marked else {
                // NB: written by another instance, perhaps not flushed yet: the next flush here
                // carries it too.
                marks.written = max(marks.written, marked)
                return .success(())
            }
            // NB: overwrite the slot holding less (or nothing valid), so the other keeps its value
            // even if this write is torn.
            let slot = (slots.0 ?? 0) <= (slots.1 ?? 0) ? 0 : 1
            let written = LogHeader.slotBytes(end: end).withUnsafeBytes {
                io.write(fd, $0, at: LogHeader.durableSlotsOffset + slot * LogHeader.durableSlotSize)
            }
            if case .success = written { marks.written = max(marks.written, end) }
            return written.map { _ in }
        }
        if case .success = result, flushesLater { scheduleMarkFlush() }
        return result
    }

    /// Flushes the durable mark within ``backgroundFlushDelay`` unless another flush does first,
    /// so a store left idle after its last flush has it recorded on stable storage too.
    private func scheduleMarkFlush() {
        let shouldSchedule = marks.withLock { marks in
            if marks.flushScheduled || marks.synced >= marks.written { return false }
            marks.flushScheduled = true
            return true
        }
        guard shouldSchedule else { return }
        scheduler.schedule { [self] in
            marks.withLock { $0.flushScheduled = false }
            // NB: best effort, like the mark itself; a failing disk is reported by the next
            // flush of data.
            _ = flushMarkIfPending()
        }
    }

    /// Asks for a flush of everything appended so far, the commit that calls it included,
    /// within ``backgroundFlushDelay``. Call after the commit's append, under the engine's lock:
    /// commits ask one at a time.
    ///
    /// - Returns: `true` when no background flush was scheduled yet and `end` is not flushed:
    ///   the caller then schedules one with ``startBackgroundSync(logger:appendedThrough:flushed:)``.
    ///   (Split in two so that the commits a scheduled flush already covers, nearly all of them,
    ///   make no closure.)
    ///
    /// NB: one load, no lock: the flush reads how far to reach when it begins, from the engine's
    /// state (under its lock), so a commit has nothing to hand it; a lock taken and released here
    /// cost every `.standard` commit two atomic read-modify-writes. Nothing is missed: this load
    /// is sequentially consistent, and the flush clears the flag, then fences, then takes the
    /// engine's lock to read the log's end. So either this load, made under that lock after the
    /// commit's end was set, sees the flag cleared, and the caller schedules another flush, or
    /// the flush takes the lock after the commit let go of it, and so sees its end.
    func requestBackgroundSync(through end: Int) -> Bool {
        if ts_atomic_load_seq_cst_u64(backgroundScheduled) != 0 || turns.reached >= end { return false }
        // NB: a plain store: only commits set it, one at a time; only the flush clears it.
        ts_atomic_store_u64(backgroundScheduled, 1)
        return true
    }

    /// Schedules the flush ``requestBackgroundSync(through:)`` asked for.
    ///
    /// - Parameters:
    ///   - appendedThrough: How far the file's log is appended and verified; 0 once it was
    ///     replaced. Asked as the flush begins: every commit made by then is covered.
    ///   - flushed: Told how far the flush reached.
    func startBackgroundSync(
        logger: LogSink, appendedThrough: @escaping @Sendable () -> Int, flushed: @escaping @Sendable (Int) -> Void
    ) {
        scheduler.schedule { [self] in
            ts_atomic_store_seq_cst_u64(backgroundScheduled, 0)
            ts_atomic_fence_seq_cst()
            let target = appendedThrough()
            guard target > 0 else { return }
            let result = turns.flush(covering: target) {
                target
            } _: {
                flushFile()
            }
            switch result {
            case .success(let target): flushed(target)
            case .failure(let error) where FileIO.flushUnsupported.contains(error):
                // NB: a file system with no flush to stable storage: `.standard` promises none,
                // so the data goes as far as the drive can take it, and no mark is recorded.
                _ = io.syncWhereSupported(fd, dataOnly: true)
            case .failure(let error): logger.log(.warning, "Background flush of the store failed: \(error).")
            }
        }
    }
}

/// Flushes of one file, one at a time, and how far they reached: what lets concurrent durable
/// commits share flushes (group commit).
///
/// A commit that a finished flush covered returns at once, even while another flush is under
/// way. Any other waits while one is under way, then returns if that flush covered it;
/// otherwise the first waiter to wake flushes for every commit appended by then.
/// NB: the waiters all wake when a flush ends (a condition, broadcast), not one after another
/// as they did behind a lock held across the flush: there, each wake-up (tens of microseconds on
/// a busy machine) came after the last, and a thread that committed again meanwhile often took
/// the next flush alone.
final class FlushTurns: @unchecked Sendable {
    // @unchecked: `syncedThrough` and `flushing` are only touched holding `condition`.
    private let condition = NSCondition()
    private var syncedThrough: Int
    private var flushing = false

    init(syncedThrough: Int) {
        self.syncedThrough = syncedThrough
    }

    /// How far flushes have reached.
    var reached: Int {
        condition.lock()
        defer { condition.unlock() }
        return syncedThrough
    }

    /// Runs `flush`, in a turn of its own, unless a flush that ends (or ended) first reaches `end`.
    ///
    /// - Parameters:
    ///   - end: The bytes the caller needs flushed; `nil`: flush in any case (`flush` decides).
    ///   - gather: Called with no lock held when this call's turn has come, before `target`.
    ///   - target: How far this flush reaches, asked when its turn has come, just before it
    ///     begins: bytes written before then are covered by it.
    ///   - flush: The flush itself; runs with no lock held.
    /// - Returns: How far flushes have reached, or `flush`'s error.
    func flush(
        covering end: Int?, gather: () -> Void = {}, target: () -> Int, _ flush: () -> Result<Void, Errno>
    ) -> Result<Int, Errno> {
        condition.lock()
        while flushing, end.map({ syncedThrough < $0 }) ?? true { CooperativeWaiting.wait(on: condition) }
        if let end, syncedThrough >= end {
            defer { condition.unlock() }
            return .success(syncedThrough)
        }
        flushing = true
        condition.unlock()
        gather()
        let reach = target()
        let result = flush()
        condition.lock()
        defer { condition.unlock() }
        flushing = false
        if case .success = result { syncedThrough = max(syncedThrough, reach) }
        condition.broadcast()
        return result.map { syncedThrough }
    }
}
