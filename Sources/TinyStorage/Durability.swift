extension TinyStorage {
    /// How far a commit has travelled when `store`, `remove` and friends return.
    ///
    /// Both modes make every commit atomic: after any crash the store holds, for each key, either
    /// the old or the new value, never a mix and never garbage.
    public enum Durability: Sendable, Hashable {
        /// The commit is in the operating system's file cache when the call returns, so it survives
        /// the process crashing or being killed (`kill -9`, the iOS watchdog) at any instant.
        /// TinyStorage then flushes it to stable storage in the background within about one second.
        /// Power loss or an operating-system crash inside that window can lose the latest commits
        /// (the file stays consistent: older commits survive); ``TinyStorage/synchronize()`` closes
        /// the window when you need to. Costs a few microseconds per commit.
        case standard
        /// The commit is on stable storage when the call returns (`fdatasync(2)` on Linux,
        /// `F_FULLFSYNC` on Apple platforms), so it survives power loss as well. The commit is
        /// written and visible first, then flushed with no lock held; commits made at the same
        /// moment on other threads share one flush.
        /// If the flush fails, the call throws `.io`: the change is in the store (other processes
        /// may have read it already) but not known to be on stable storage; the next durable
        /// commit or ``TinyStorage/synchronize()`` flushes again. Costs one disk flush per call:
        /// tens of microseconds on a fast SSD, milliseconds on slower storage.
        case immediate
    }
}
