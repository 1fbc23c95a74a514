import CTinyStorageShims

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The lock file beside a store's data file: the target of the cross-process `flock(2)` and a
/// page of counters shared by every process through `mmap(2)`.
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
/// ```
///
/// Writers change the page only while holding the lock, except the two flush fields, which only
/// grow. Readers load `sequence` without any system call: when it equals the value they last saw,
/// no other process has committed since, so a cached read is current. The file is the truth; the
/// page only says where to look, and only for the boot that wrote it: after a restart (or a power
/// loss) a page from an earlier boot is ignored and the data file is checked from its start.
///
/// The first 32 bytes are laid out as version 1 of this library left them, so a process still
/// running the older version (which only ever uses those) keeps working beside this one until the
/// data file is upgraded, which it then refuses to read.
final class CoordinationFile: @unchecked Sendable {
    // @unchecked: `page` is shared memory accessed only through atomic loads and stores, and
    // the fields other than `sequence` and the flush marks are written only under the flock.
    static let size = 4096
    private static let magic: UInt64 = 0x0100_4B43_4F4C_5354  // "TSLOCK\0\u{1}" little-endian

    let path: String
    private let fd: Int32
    private let page: UnsafeMutableRawPointer
    private let io: FileIO
    /// This boot, as the page records it.
    private let boot: BootIdentity

    /// Opens (creating if needed, mode 0600) and maps the lock file `name` in `folder`.
    ///
    /// - Throws: `.unsafeFile` when something else than the store's own file is there, or the
    ///   system error.
    init(in folder: StoreFolder, name: String) throws(TinyStorageError) {
        let path = folder.path(of: name)
        self.path = path
        self.io = folder.io
        self.boot = folder.io.fileSystem.bootIdentity
        let io = folder.io
        guard let fd = try folder.openFile(name, writable: true, creation: .ifMissing) else {
            throw TinyStorageError(.io, "The lock file '\(path)' could not be created.")
        }
        do throws(Errno) {
            let status = try io.status(fd).get()
            if status.size < Self.size {
                // NB: growing the file happens under the lock so two openers cannot race a reader
                // into mapping past the end of a shorter file (SIGBUS).
                try io.lock(fd, exclusive: true).get()
                defer { _ = io.lock(fd, exclusive: false) }
                if try io.status(fd).get().size < Self.size {
                    try io.truncate(fd, to: Self.size).get()
                }
            }
            self.page = try io.mapShared(fd, length: Self.size).get()
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

    /// Takes the exclusive cross-process lock, waiting for other processes' commits to finish.
    func lock() throws(Errno) { try io.lock(fd, exclusive: true).get() }

    /// Releases the cross-process lock.
    func unlock() { _ = io.lock(fd, exclusive: false) }

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
    var consistentPublished: (generation: UInt64, length: Int)? {
        var attempts = 0
        while true {
            switch readPublished() {
            case .published(let generation, let length): return (generation, length)
            case .notPublished: return nil
            case .changing:
                attempts += 1
                if attempts > 64 { usleep(100) } else { sched_yield() }
            }
        }
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
        ts_atomic_fetch_add_u64(page + 72, 1)
        ts_atomic_store_u64(page + 8, generation)
        ts_atomic_store_u64(page + 16, UInt64(length))
        ts_atomic_fetch_add_u64(page + 72, 1)
        if !isInitialized {
            ts_atomic_store_u64(page + 32, boot.high)
            ts_atomic_store_u64(page + 40, boot.low)
            ts_atomic_store_u64(page, Self.magic)
        }
        return ts_atomic_fetch_add_u64(page + 24, 1) + 1
    }

    // MARK: The change signal

    /// Wakes every thread, in any process, waiting in ``waitForChange(after:timeoutMilliseconds:)``.
    /// Costs an atomic increment, plus one system call (`futex(FUTEX_WAKE)`) only when a thread
    /// went to sleep on the signal since the last wake-up. Call after publishing, with no lock held.
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
