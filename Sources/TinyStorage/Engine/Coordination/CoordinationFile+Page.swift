import CTinyStorageShims

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What the lock page says and how it changes: the published generation and length (a sequence
/// lock, read without the commit lock), the counter every commit bumps, the change signal, and
/// the marks of flushes and cuts. The layout and what may be trusted of it are in
/// ``CoordinationFile``'s documentation; taking the commit lock is in CoordinationFile.swift.
extension CoordinationFile {
    /// Makes the page say that nothing is published: whoever looks next checks the data file
    /// from its start. Call under the lock.
    func markNotPublished() {
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
        (ts_atomic_load_u64(page + 8), Int(clamping: ts_atomic_load_u64(page + 16)))
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
        let length = Int(clamping: ts_atomic_load_u64(page + 16))
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
        // NB: read-only, the page is not fixed: the data file is checked from its start.
        guard !isReadOnly, (try? lock()) != nil else { return nil }
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
        // NB: in the tests' simulation, other processes may run here, after the append, and
        // while the stamp is odd, as they do when a writer is descheduled there.
        CooperativeWaiting.point("publish")
        // NB: made odd, then even, whatever it was: a writer killed between the two left it odd.
        let stamp = ts_atomic_load_u64(page + 72) | 1
        ts_atomic_store_u64(page + 72, stamp)
        ts_atomic_store_u64(page + 8, generation)
        ts_atomic_store_u64(page + 16, UInt64(length))
        CooperativeWaiting.point("publishing")
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

    /// Notes that a temporary file is being created in the store's folder: the next process to
    /// open the store lists the folder for abandoned ones (see
    /// `StoreFolder.removeAbandonedTemporaryFiles`). A hint: an open clears it before it lists.
    func noteTemporaryFile() {
        ts_atomic_store_u64(page + Self.temporariesOffset, 1)
    }

    // MARK: Flush marks

    /// Whether the name of the data file `inode` is known to be durable: its
    /// folder was synced since it was renamed into place or created. A file put there by anyone
    /// else (a restore) is another inode, so its name is flushed once more.
    func isNameDurable(ofFileWithInode inode: UInt64) -> Bool {
        ts_atomic_load_u64(page + Self.nameSyncedOffset) == inode
    }

    /// Records that the folder was synced while the data file `inode` had its name.
    func recordNameDurable(ofFileWithInode inode: UInt64) {
        ts_atomic_store_u64(page + Self.nameSyncedOffset, inode)
    }

    // MARK: Cuts awaiting a flush

    /// The count of cuts when a cut of the data file's end was made that no flush has covered
    /// yet, or `nil`. Until one has, nothing may be appended after the cut: a power loss could
    /// bring the bytes cut off back under the new ones, and a new record sharing a sector's bytes
    /// with a dead one could make it whole again (see `Engine.cutOff`). A hint that asks for
    /// more flushing, never less: a page from another boot or another file asks for a flush once.
    var cutAwaitingFlush: UInt64? {
        let cuts = ts_atomic_load_u64(page + Self.cutsOffset)
        return cuts == ts_atomic_load_u64(page + Self.cutsFlushedOffset) ? nil : cuts
    }

    /// Records a cut of the data file's end. Call under the lock, right after the cut.
    func noteCut() {
        ts_atomic_fetch_add_u64(page + Self.cutsOffset, 1)
    }

    /// Records that a flush of the data file which began when ``cutAwaitingFlush`` was `cuts`
    /// succeeded. A cut made since keeps asking for a flush.
    func recordCutsFlushed(_ cuts: UInt64) {
        while true {
            let flushed = ts_atomic_load_u64(page + Self.cutsFlushedOffset)
            let now = ts_atomic_load_u64(page + Self.cutsOffset)
            // NB: only forward: a flusher that began later may have recorded more already. But a
            // count of flushed cuts ahead of the count of cuts is no count any process wrote (the
            // page was written over, or put back from elsewhere): it is replaced, or every commit
            // would let go of the lock to flush, forever (the simulation found that loop).
            let valid = now &- flushed < 1 << 62
            guard cuts != flushed, !valid || cuts &- flushed < 1 << 62 else { return }
            if ts_atomic_compare_exchange_u64(page + Self.cutsFlushedOffset, flushed, cuts) { return }
        }
    }
}
