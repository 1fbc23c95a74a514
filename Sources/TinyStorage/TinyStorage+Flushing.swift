extension TinyStorage {
    /// Returns once everything committed so far — by this instance or any other process — is on
    /// stable storage, so it survives a power loss.
    ///
    /// With ``Durability/standard`` (the default), a commit survives the process being killed the
    /// moment the call returns, and reaches stable storage within about a second, in the
    /// background; a power loss or kernel crash within that second can lose the newest commits,
    /// never older ones. Call this where that second matters (before telling a server, say),
    /// or open the store with ``Durability/immediate`` to flush every commit before it returns.
    /// Like `UserDefaults.synchronize()`, but it throws when the disk does.
    ///
    /// ```swift
    /// storage.store(receipt, forKey: "lastReceipt")
    /// try storage.synchronize()
    /// ```
    ///
    /// Flushes share one `fdatasync(2)` (`fcntl(F_FULLFSYNC)` on Apple platforms) with concurrent
    /// durable commits. No lock is held while it runs.
    ///
    /// - Throws: `.unavailable` when the store cannot be read; `.io` when the flush fails (then
    ///   nothing new is known to be on stable storage).
    public func synchronize() throws {
        try engine.synchronize()
    }
}
