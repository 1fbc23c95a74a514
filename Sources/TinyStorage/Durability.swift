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
        /// (the file stays consistent: older commits survive). Costs about a microsecond per commit.
        case standard
        /// The commit is on stable storage when the call returns (`fdatasync(2)` on Linux,
        /// `F_FULLFSYNC` on Apple platforms), so it survives power loss as well. The flush happens
        /// before the commit becomes visible to anyone: if it fails, the call throws `.io` and
        /// nothing changed. Costs one disk flush per commit, while other commits to the store
        /// wait: tens of microseconds on a fast SSD, milliseconds on slower storage. Space is
        /// reserved ahead in 256 KiB steps so each flush writes data blocks only.
        case immediate
    }
}
