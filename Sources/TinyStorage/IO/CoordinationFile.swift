import CTinyStorageShims

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The lock file beside a store's data file: a page shared by every process through `mmap(2)`,
/// holding counters and, on Linux, the cross-process commit lock (see ``CommitLock``; elsewhere
/// that lock is a `flock(2)` on this file).
///
/// ```text
/// offset 0  magic       "TSLOCK" 0x00 0x01 once initialized
/// offset 8  generation  of the data file (bumped by compaction and repairs)
/// offset 16 length      the data file's committed length
/// offset 24 sequence    bumped after every commit, compaction or repair
/// offset 32 boot        the boot (two u64) during which the page was last validated
/// offset 48 durable     bytes of this generation known to be on stable storage
/// offset 56 dirSynced   the last generation whose file's name is durable (directory synced)
/// offset 64 signal      u32 bumped after every publish; Linux processes sleep on it (futex)
/// offset 68 sleepers    u32 flag a thread raises before it sleeps on `signal` (in any process)
/// offset 72 stamp       odd while generation and length are being changed (a sequence lock)
/// offset 80 mutexStamp  "SMUTEX" 0x00 0x01, then the boot (two u64) during which the mutex was
///                       initialized (Linux; see SharedMutexCommitLock)
/// offset 128 mutex      the commit lock: a robust, process-shared pthread_mutex_t (Linux)
/// ```
///
/// Writers change the page only while holding the lock, except the two flush fields, which only
/// grow. Readers load `sequence` without any system call: when it equals the value they last saw,
/// no other process has committed since, so a cached read is current. The file is the truth; the
/// page only says where to look, and only for the boot that wrote it: after a restart (or a power
/// loss) a page from an earlier boot is ignored and the data file is checked from its start.
///
/// A lock file written before the mutex existed has zeros from offset 80 on, and gets its mutex
/// when first opened; its other fields keep their places. NB: on Linux, a process running a
/// build from before the mutex (no release had it), which takes `flock` for every commit, must
/// not share a store with one running this build: the two locks do not exclude each other.
///
/// The first 32 bytes are laid out as version 1 of this library left them, so a process still
/// running the older version (which only ever uses those) keeps working beside this one until the
/// data file is upgraded, which it then refuses to read.
final class CoordinationFile: @unchecked Sendable {
    // @unchecked: `page` is shared memory accessed only through atomic loads and stores, and
    // the fields other than `sequence` and the flush marks are written only under the commit lock.
    static let size = 4096
    private static let magic: UInt64 = 0x0100_4B43_4F4C_5354  // "TSLOCK\0\u{1}" little-endian

    let path: String
    private let fd: Int32
    private let page: UnsafeMutableRawPointer
    private let io: FileIO
    /// What every commit takes: the page's mutex where there is one (Linux), `flock` on this
    /// file otherwise (see ``lock(excludingOlderVersions:)``).
    ///
    /// NB: two stored locks (classes, so calling one copies nothing) rather than one
    /// `any CommitLock`: calling through the existential cost each commit about 50 instructions.
    private let sharedMutex: SharedMutexCommitLock?
    private let fileLock: FileCommitLock
    /// This boot, as the page records it.
    private let boot: BootIdentity

    /// Opens (creating if needed, mode 0600) and maps the lock file `name` in `folder`.
    ///
    /// - Parameter sharedMutex: Whether the commit lock is the page's mutex where there is one
    ///   (Linux); `false` takes `flock(2)` as Apple platforms do (see `Engine.Options.usesFileLock`).
    /// - Throws: `.unsafeFile` when something else than the store's own file is there, or the
    ///   system error.
    init(in folder: StoreFolder, name: String, sharedMutex: Bool = true) throws(TinyStorageError) {
        let path = folder.path(of: name)
        self.path = path
        self.io = folder.io
        self.boot = folder.io.fileSystem.bootIdentity
        let io = folder.io
        guard let (fd, opened) = try folder.openFileWithStatus(name, writable: true, creation: .ifMissing) else {
            throw TinyStorageError(.io, "The lock file '\(path)' could not be created.")
        }
        do throws(Errno) {
            // NB: the size the open saw is good enough to skip the lock: the file only ever grows.
            var size = opened?.size ?? 0
            if opened == nil { size = try io.status(fd).get().size }
            if size < Self.size {
                // NB: growing the file happens under the lock so two openers cannot race a reader
                // into mapping past the end of a shorter file (SIGBUS).
                try io.lock(fd, exclusive: true).get()
                defer { _ = io.lock(fd, exclusive: false) }
                if try io.status(fd).get().size < Self.size {
                    try io.truncate(fd, to: Self.size).get()
                }
            }
            let page = try io.mapShared(fd, length: Self.size).get()
            do throws(Errno) {
                let mutex =
                    try sharedMutex
                    ? SharedMutexCommitLock.attach(
                        to: page, fd: fd, io: io, boot: folder.io.fileSystem.bootIdentity) : nil
                self.sharedMutex = mutex
                self.fileLock = FileCommitLock(fd: fd, io: io)
            } catch {
                io.unmap(page, length: Self.size)
                throw error
            }
            self.page = page
            self.fd = fd
        } catch {
            io.close(fd)
            throw .system(error, "open the lock file", path: path)
        }
    }

    deinit {
        io.unmap(page, length: Self.size)
        io.close(fd)
    }

    /// Takes the exclusive cross-process commit lock, waiting for other processes' commits to finish.
    ///
    /// When its previous holder died holding it (Linux's robust mutex says so), that holder may
    /// have been anywhere in a commit, a compaction's swap or a repair: the page is marked as not
    /// published and every process is told to look, so the data file is checked from its start
    /// (an interrupted append is cut off as a torn tail) before anything else is appended. Only
    /// then is the lock marked consistent.
    ///
    /// - Parameter excludingOlderVersions: Also take `flock` on this file, as versions of this
    ///   library from before the mutex do for every commit, when it is the mutex: for everything
    ///   but appending to a file in the current format (a file of an older format may be shared
    ///   with such a process, which only ever appends to one of those). Pass the same to ``unlock(excludingOlderVersions:)``.
    /// - Returns: `true` when the previous holder died holding the lock.
    @discardableResult
    func lock(excludingOlderVersions: Bool = true) throws(Errno) -> Bool {
        let ownerDied: Bool
        switch sharedMutex?.lock() ?? fileLock.lock() {
        case .success(.acquired):
            ownerDied = false
        case .success(.ownerDied):
            markNotPublished()
            ts_atomic_fetch_add_u64(page + 24, 1)  // every process looks again
            sharedMutex?.markConsistent()
            ownerDied = true
        case .failure(let error):
            throw error
        }
        if excludingOlderVersions, let sharedMutex {
            // NB: after the mutex, always: every process of this version takes them in that order.
            if case .failure(let error) = io.lock(fd, exclusive: true) {
                sharedMutex.unlock()
                throw error
            }
        }
        return ownerDied
    }

    /// Whether a process that dies holding the commit lock is reported to the next holder (the
    /// Linux mutex): then nothing past a data file's committed length is taken for the remains of
    /// a dead writer unless the lock says one died, and commits may append through a mapping of
    /// space allocated ahead (on the file systems ``AppendMapping`` trusts).
    var reportsDeadHolders: Bool { sharedMutex != nil }

    /// Releases the cross-process commit lock (and `flock`, when it was taken with it).
    func unlock(excludingOlderVersions: Bool = true) {
        guard sharedMutex != nil else { return fileLock.unlock() }
        if excludingOlderVersions { _ = io.lock(fd, exclusive: false) }
        // NB: not bound with `if let`, which retained and released it.
        sharedMutex?.unlock()
    }

    /// Makes the page say that nothing is published: whoever looks next checks the data file
    /// from its start. Call under the lock.
    private func markNotPublished() {
        ts_atomic_store_u64(page, 0)
        // NB: even again, so readers stop waiting for a writer that is gone.
        if ts_atomic_load_u64(page + 72) & 1 != 0 { ts_atomic_fetch_add_u64(page + 72, 1) }
    }

    /// Bumped by every commit in any process. Lock-free; no system call.
    var sequence: UInt64 { ts_atomic_load_u64(page + 24) }

    /// Whether a process has published a state during this boot, so the published generation
    /// and length can be trusted. Read under the lock, or through ``consistentPublished``.
    var isInitialized: Bool {
        guard ts_atomic_load_u64(page) == Self.magic else { return false }
        return ts_atomic_load_u64(page + 32) == boot.high && ts_atomic_load_u64(page + 40) == boot.low
    }

    /// The data file's generation and committed length, as last published. Read under the lock.
    var published: (generation: UInt64, length: Int) {
        (ts_atomic_load_u64(page + 8), Int(ts_atomic_load_u64(page + 16)))
    }

    /// What the page says without the lock (see ``readPublished()``).
    enum PublishedState {
        /// The generation and length, as one consistent pair published during this boot.
        case published(generation: UInt64, length: Int)
        /// A writer is changing them right now: read again in a moment.
        case changing
        /// Nothing was published during this boot: the data file must be checked from its start.
        case notPublished
    }

    /// The generation and length as one consistent pair, read without the lock.
    func readPublished() -> PublishedState {
        let before = ts_atomic_load_u64(page + 72)
        guard before & 1 == 0 else { return .changing }
        guard isInitialized else { return .notPublished }
        let generation = ts_atomic_load_u64(page + 8)
        let length = Int(ts_atomic_load_u64(page + 16))
        guard ts_atomic_load_u64(page + 72) == before else { return .changing }
        return .published(generation: generation, length: length)
    }

    /// ``readPublished()`` until no writer is changing the page (they do so for nanoseconds, but
    /// may be descheduled meanwhile); `nil` when nothing was published during this boot.
    ///
    /// A writer killed in the middle of publishing leaves the page changing forever: after a
    /// while the reader takes the lock, where no live writer can be publishing, and a page still
    /// changing is marked as not published, so the next look checks the data file from its start.
    /// Call without the lock.
    var consistentPublished: (generation: UInt64, length: Int)? {
        for attempt in 0..<200 {
            switch readPublished() {
            case .published(let generation, let length): return (generation, length)
            case .notPublished: return nil
            case .changing: if attempt < 100 { sched_yield() } else { usleep(50) }
            }
        }
        guard (try? lock()) != nil else { return nil }
        defer { unlock() }
        if ts_atomic_load_u64(page + 72) & 1 != 0 {
            markNotPublished()
            return nil
        }
        guard isInitialized else { return nil }
        return published
    }

    /// Announces a new committed state to every process, and marks the page as valid for this
    /// boot. Call under the lock.
    /// - Returns: the new sequence number.
    @discardableResult
    func publish(generation: UInt64, length: Int) -> UInt64 {
        let changesGeneration = ts_atomic_load_u64(page + 8) != generation
        if changesGeneration {
            // NB: a new file starts with nothing known flushed, and its name not yet durable.
            ts_atomic_store_u64(page + 48, 0)
        }
        // NB: made odd, then even, whatever it was: a writer killed between the two left it odd.
        let stamp = ts_atomic_load_u64(page + 72) | 1
        ts_atomic_store_u64(page + 72, stamp)
        ts_atomic_store_u64(page + 8, generation)
        ts_atomic_store_u64(page + 16, UInt64(length))
        ts_atomic_store_u64(page + 72, stamp &+ 1)
        if !isInitialized {
            ts_atomic_store_u64(page + 32, boot.high)
            ts_atomic_store_u64(page + 40, boot.low)
            ts_atomic_store_u64(page, Self.magic)
        }
        return ts_atomic_fetch_add_u64(page + 24, 1) + 1
    }

    /// Leaves the page as a writer killed in the middle of ``publish(generation:length:)``
    /// leaves it: the stamp odd, the new generation and length written, the sequence not bumped.
    /// For tests of a holder's death only. Call under the lock.
    func startPublishing(generation: UInt64, length: Int) {
        ts_atomic_store_u64(page + 72, ts_atomic_load_u64(page + 72) | 1)
        ts_atomic_store_u64(page + 8, generation)
        ts_atomic_store_u64(page + 16, UInt64(length))
    }

    // MARK: The change signal

    /// Wakes every thread, in any process, waiting in ``waitForChange(after:timeoutMilliseconds:)``.
    /// Costs an atomic increment, plus one system call (`futex(FUTEX_WAKE)`) only when a thread
    /// went to sleep on the signal since the last wake-up. Call after publishing, with the file
    /// lock released: the threads it wakes may need it.
    func signalChange() { ts_change_signal(page + 64, page + 68) }

    /// Wakes the threads waiting on the change signal without moving it, so one that was asked
    /// to stop notices now.
    func wakeWaiters() { ts_change_wake(page + 64) }

    /// The change signal's current value.
    var changeSignal: UInt32 { ts_change_counter(page + 64) }

    /// Sleeps until the change signal moves from `seen` (`futex(FUTEX_WAIT)`), at most
    /// `timeoutMilliseconds`. Linux only; elsewhere returns at once.
    func waitForChange(after seen: UInt32, timeoutMilliseconds: Int32) {
        _ = ts_change_wait(page + 64, page + 68, seen, timeoutMilliseconds)
    }

    // MARK: Flush marks

    /// Bytes of the current generation's file known to be on stable storage, in any process.
    var durableLength: Int { Int(ts_atomic_load_u64(page + 48)) }

    /// Records that `generation`'s file is on stable storage through `length`. Lock-free: the
    /// mark only grows, and only for the generation still published.
    func recordDurable(generation: UInt64, length: Int) {
        while true {
            let current = ts_atomic_load_u64(page + 48)
            guard ts_atomic_load_u64(page + 8) == generation, current < UInt64(length) else { return }
            if ts_atomic_compare_exchange_u64(page + 48, current, UInt64(length)) { return }
        }
    }

    /// Whether `generation`'s file name is known to be durable (its directory was synced since
    /// the file was renamed into place).
    func isNameDurable(generation: UInt64) -> Bool { ts_atomic_load_u64(page + 56) >= generation }

    /// Records that the directory was synced after `generation`'s file was renamed into place.
    func recordNameDurable(generation: UInt64) {
        while true {
            let current = ts_atomic_load_u64(page + 56)
            guard current < generation else { return }
            if ts_atomic_compare_exchange_u64(page + 56, current, generation) { return }
        }
    }
}
