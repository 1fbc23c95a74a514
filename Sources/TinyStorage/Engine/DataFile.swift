import Dispatch

/// An open data file and the bookkeeping of how much of it is on stable storage.
///
/// Reference-counted so a flush can run after the engine's lock is released even if a compaction
/// replaces the file meanwhile: the descriptor stays open until the last user lets go.
final class DataFile: Sendable {
    let fd: Int32
    private let io: FileIO

    private struct Progress {
        /// Bytes known to be flushed.
        var syncedThrough: Int
        /// The furthest end a `.standard` commit asked to have flushed.
        var requestedThrough = 0
        var backgroundScheduled = false
    }

    /// NB: the lock is held during the flush itself, so concurrent durable commits wait for one
    /// flush and share it (group commit): each flush covers every append that completed before it
    /// began, and appends happen in file order, under the cross-process lock.
    private let progress: Locked<Progress>

    /// How long a `.standard` commit may stay in the OS cache before TinyStorage flushes it.
    static let backgroundFlushDelay: DispatchTimeInterval = .seconds(1)

    init(fd: Int32, io: FileIO, syncedThrough: Int = 0) {
        self.fd = fd
        self.io = io
        self.progress = Locked(Progress(syncedThrough: syncedThrough))
    }

    deinit { io.close(fd) }

    /// Flushes the file unless bytes up to `end` are already on stable storage (`fdatasync(2)`,
    /// `fcntl(F_FULLFSYNC)`).
    func sync(through end: Int) throws(Errno) {
        try progress.withLock { (progress) throws(Errno) in
            if progress.syncedThrough >= end { return }
            try io.sync(fd, dataOnly: true).get()
            progress.syncedThrough = end
        }
    }

    /// Records in the header (version 2) that the file is on stable storage through `end`: two
    /// `pread`/`pwrite` calls, after the flush that got it there. The mark itself reaches stable
    /// storage with the next flush, so it never claims more than what is durable. Best effort:
    /// a mark that could not be written only makes a later recovery more cautious.
    func recordDurableMark(through end: Int) {
        let offset = LogHeader.durableSlotsOffset
        guard case .success(let head) = io.read(fd, count: LogFormat.headerSize, at: 0),
            head.count == LogFormat.headerSize
        else { return }
        let slots = head.withUnsafeBytes { raw in
            (LogHeader.slotValue(in: raw, slot: 0), LogHeader.slotValue(in: raw, slot: 1))
        }
        guard end > max(slots.0 ?? 0, slots.1 ?? 0) else { return }
        // NB: overwrite the slot holding less (or nothing valid), so the other keeps its value
        // even if this write is torn.
        let slot = (slots.0 ?? 0) <= (slots.1 ?? 0) ? 0 : 1
        _ = LogHeader.slotBytes(end: end).withUnsafeBytes {
            io.write(fd, $0, at: offset + slot * LogHeader.durableSlotSize)
        }
    }

    /// Arranges a flush of everything up to `end` within ``backgroundFlushDelay``; `flushed` is
    /// told how far the flush reached.
    func scheduleBackgroundSync(
        through end: Int, logger: LogSink, flushed: @escaping @Sendable (Int) -> Void
    ) {
        let shouldSchedule = progress.withLock { progress in
            progress.requestedThrough = max(progress.requestedThrough, end)
            if progress.backgroundScheduled || progress.syncedThrough >= end { return false }
            progress.backgroundScheduled = true
            return true
        }
        guard shouldSchedule else { return }
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + Self.backgroundFlushDelay) {
            [self] in
            let result: Result<Int, Errno> = progress.withLock { progress in
                progress.backgroundScheduled = false
                // NB: read before the flush: every commit that asked up to here had written its
                // bytes already, so the flush covers them (later ones schedule a new flush).
                let target = progress.requestedThrough
                let result = io.sync(fd, dataOnly: true)
                if case .success = result { progress.syncedThrough = max(progress.syncedThrough, target) }
                return result.map { target }
            }
            switch result {
            case .success(let target): flushed(target)
            case .failure(let error): logger.log(.warning, "Background flush of the store failed: \(error).")
            }
        }
    }
}
