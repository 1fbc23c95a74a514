import CTinyStorageShims
import Dispatch

// Hooks for the `Benchmarks/` package, which is another package and so cannot use `package`
// declarations: `@_spi(Benchmarks) import TinyStorage`. Not API; they may change at any time.

/// Durations for which commits and repairs held the cross-process lock, while recording.
enum LockHoldRecorder {
    static let samples = Locked<[UInt64]>([])

    @inline(__always)
    static var isRecording: Bool { ts_lock_hold_recording() != 0 }

    static func record(_ nanoseconds: UInt64) {
        samples.withLock { $0.append(nanoseconds) }
    }
}

extension TinyStorage {
    /// Rewrites the data file with only the live entries now (see `compactNow()`).
    @_spi(Benchmarks)
    public func _compactNow() throws {
        try engine.compactNow()
    }

    /// Starts recording, in this process, how long each hold of a store's cross-process lock
    /// lasts, forgetting earlier records.
    /// Returns once every background compaction scheduled so far has finished, so a benchmark's
    /// teardown does not delete a store's folder under one.
    @_spi(Benchmarks)
    public static func _waitForBackgroundCompactions() {
        Engine.waitForBackgroundCompactions()
    }

    /// Returns once every change this store has seen so far has been delivered: streams fed,
    /// notifications posted (waits for the announcing queue, which must be running).
    @_spi(Benchmarks)
    public func _waitUntilDelivered() {
        engine.delivery.waitUntilDelivered()
    }

    @_spi(Benchmarks)
    public static func _startRecordingLockHolds() {
        LockHoldRecorder.samples.withLock { $0.removeAll() }
        ts_set_lock_hold_recording(1)
    }

    /// Stops recording and returns the holds recorded since the start, in nanoseconds.
    @_spi(Benchmarks)
    public static func _stopRecordingLockHolds() -> [UInt64] {
        ts_set_lock_hold_recording(0)
        return LockHoldRecorder.samples.withLock { $0 }
    }
}
