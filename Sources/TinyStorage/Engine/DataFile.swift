import Dispatch

/// An open data file and the bookkeeping of how much of it is on stable storage.
///
/// Reference-counted so a flush can run after the engine's lock is released even if a compaction
/// replaces the file meanwhile: the descriptor stays open until the last user lets go.
final class DataFile: Sendable {
    let fd: Int32
    private let io: FileIO
    /// Bytes known to be flushed, and whether a background flush is already scheduled. The lock is
    /// held during the flush itself, so concurrent durable commits wait for one flush and share it.
    private let progress = Locked<(syncedThrough: Int, backgroundScheduled: Bool)>((0, false))

    /// How long a `.standard` commit may stay in the OS cache before TinyStorage flushes it.
    static let backgroundFlushDelay: DispatchTimeInterval = .seconds(1)

    init(fd: Int32, io: FileIO, syncedThrough: Int = 0) {
        self.fd = fd
        self.io = io
        progress.withLock { $0.syncedThrough = syncedThrough }
    }

    deinit { io.close(fd) }

    /// Flushes the file unless bytes up to `end` are already on stable storage (`fdatasync(2)`).
    func sync(through end: Int) throws(Errno) {
        try progress.withLock { (progress) throws(Errno) in
            if progress.syncedThrough >= end { return }
            try io.sync(fd, dataOnly: true).get()
            progress.syncedThrough = end
        }
    }

    /// Arranges a flush of everything up to `end` within ``backgroundFlushDelay``.
    func scheduleBackgroundSync(through end: Int, logger: LogSink) {
        let shouldSchedule = progress.withLock { progress in
            if progress.backgroundScheduled || progress.syncedThrough >= end { return false }
            progress.backgroundScheduled = true
            return true
        }
        guard shouldSchedule else { return }
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + Self.backgroundFlushDelay) {
            [self] in
            // NB: flush everything written so far, including commits made after scheduling.
            let result: Result<Void, Errno> = progress.withLock { progress in
                progress.backgroundScheduled = false
                let result = io.sync(fd, dataOnly: true)
                if case .success = result { progress.syncedThrough = max(progress.syncedThrough, end) }
                return result
            }
            if case .failure(let error) = result {
                logger.log(.warning, "Background flush of the store failed: \(error).")
            }
        }
    }
}
