/// Whether a store can be used right now.
public enum Availability: Sendable {
    /// The store was read and verified; reads and writes work.
    case available
    /// The store cannot be read right now, for the reason given (`.permissionDenied`, `.io`,
    /// `.corrupted`, `.unsupportedFormat`, `.invalidName`…). Reads throw (or return `nil` and log),
    /// writes are refused, and nothing on disk is touched.
    case unavailable(TinyStorageError)

    /// Whether the store is available.
    public var isAvailable: Bool {
        if case .available = self { return true }
        return false
    }
}

extension TinyStorage {
    /// Whether the store can be read and written right now, and if not, why.
    ///
    /// Reading this property tries to open the store again when it was unavailable. A store
    /// directory that does not exist yet is a new, empty, available store; a data file that exists
    /// but cannot be opened, read or verified is unavailable, never empty.
    public var availability: Availability {
        guard let failure = engine.currentFailure() else { return .available }
        return .unavailable((failure.underlying as? TinyStorageError) ?? failure)
    }

    /// Suspends until the store is available: immediately when it is, otherwise as soon as its
    /// file can be read (checked every `pollInterval`).
    ///
    /// ```swift
    /// // A widget launched before the device's first unlock:
    /// try await storage.waitUntilAvailable(timeout: .seconds(5))
    /// ```
    ///
    /// - Parameters:
    ///   - timeout: How long to wait at most; `nil` waits until the task is cancelled.
    ///   - pollInterval: How often to look again when no file event arrives.
    ///   - clock: The clock that measures both (tests pass a controllable one).
    /// - Throws: `CancellationError` when the task is cancelled; `TinyStorageError` with code
    ///   `.unavailable` (the last reason as ``TinyStorageError/underlying``) when `timeout` passes.
    public func waitUntilAvailable<C: Clock>(
        timeout: C.Duration? = nil, pollInterval: C.Duration, clock: C
    ) async throws {
        let deadline = timeout.map { clock.now.advanced(by: $0) }
        while true {
            guard case .unavailable(let reason) = availability else { return }
            try Task.checkCancellation()
            if let deadline, clock.now >= deadline {
                throw TinyStorageError(
                    .unavailable, "The store did not become available in time. \(reason.message)", underlying: reason)
            }
            var wake = clock.now.advanced(by: pollInterval)
            if let deadline, deadline < wake { wake = deadline }
            try await clock.sleep(until: wake, tolerance: nil)
        }
    }

    /// Suspends until the store is available, checking every 50 ms.
    ///
    /// - Parameter timeout: How long to wait at most; `nil` waits until the task is cancelled.
    /// - Throws: `CancellationError`, or `.unavailable` when `timeout` passes.
    public func waitUntilAvailable(timeout: Duration? = nil) async throws {
        try await waitUntilAvailable(timeout: timeout, pollInterval: .milliseconds(50), clock: ContinuousClock())
    }
}
