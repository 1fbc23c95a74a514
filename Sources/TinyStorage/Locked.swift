#if canImport(Darwin)
import Darwin
import os
#else
import CTinyStorageShims
#endif

/// A value guarded by a mutex: the one place this library keeps mutable shared state.
///
/// `Synchronization.Mutex` would do, but it needs macOS 15 / iOS 18 and we ship to iOS 17, so
/// this wraps `os_unfair_lock` on Apple platforms and a futex word elsewhere (`ts_mutex_lock`: an
/// inline compare-and-swap, a system call only when contended; it replaced a `pthread_mutex_t`,
/// whose lock and unlock took about a fifth of a cached read). The lock is not recursive: never
/// call back into the same box from inside `withLock`. A thread of the tests' deterministic
/// simulation that finds it taken lets the others run instead of sleeping (``CooperativeWaiting``).
///
/// NB: do not keep a function type directly in the state (wrap it in a class). Called from
/// unspecialized code, `withLock` reabstracts an `inout` closure on the way in and out and writes
/// the wrapped closure back, so the chain of thunks grows with every call until the stack overflows.
final class Locked<State>: @unchecked Sendable {
    // @unchecked: every access to `state` goes through `withLock`, which holds `mutex`.
    // NB: for the same reason the runtime's exclusivity check on each access is redundant, and it
    // cost a store's cached read (its hot spot) about 7% in a profile: left out.
    @exclusivity(unchecked) private var state: State
    #if canImport(Darwin)
    private let mutex: UnsafeMutablePointer<os_unfair_lock>
    #else
    private let mutex: UnsafeMutablePointer<UInt32>
    #endif

    init(_ initial: State) {
        state = initial
        #if canImport(Darwin)
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: os_unfair_lock())
        #else
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: 0)
        #endif
    }

    deinit {
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the state.
    @inline(__always)
    func withLock<R, E: Error>(_ body: (inout State) throws(E) -> R) throws(E) -> R {
        #if canImport(Darwin)
        if !os_unfair_lock_trylock(mutex) { lockContended() }
        defer { os_unfair_lock_unlock(mutex) }
        #else
        ts_mutex_lock(mutex)
        defer { ts_mutex_unlock(mutex) }
        #endif
        // NB: a state of no size (`Locked(())`, a plain mutex) is laid out at offset 0, over the
        // object's header, and ThreadSanitizer takes the `inout` access below for a write there,
        // racing with any thread that reads the header before it locks (the unspecialized
        // `withLock` does, to find `mutex`): a false report. Such a state has nothing to guard,
        // so `body` gets a copy. Once specialized the condition is a constant: nothing is left
        // of it in release builds.
        if MemoryLayout<State>.size == 0 {
            var nothing = state
            return try body(&nothing)
        }
        return try body(&state)
    }

    #if canImport(Darwin)
    /// Takes the lock another thread holds: sleeping, or on a thread of the tests' simulation,
    /// letting the others run until it is free (see ``CooperativeWaiting``). Elsewhere the shims
    /// do the same in `ts_mutex_lock_contended`.
    @inline(never)
    private func lockContended() {
        guard let waiter = CooperativeWaiting.current else { return os_unfair_lock_lock(mutex) }
        while !os_unfair_lock_trylock(mutex) { waiter.letOthersRun() }
    }
    #else
    /// Whether a thread found the lock taken and marked it waited for: it sleeps, or is about
    /// to, until the holder lets go. For tests that must take the contended path, not hope for it.
    var hasWaiter: Bool { ts_mutex_state(mutex) == 2 }

    /// Whether a thread holds the lock: for tests. NB: seeing it held orders nothing (the holder
    /// took it with an acquire-only exchange), so ThreadSanitizer sees no synchronization either.
    var isHeld: Bool { ts_mutex_state(mutex) != 0 }
    #endif
}
