import CTinyStorageShims
import Foundation

/// What a thread does where it waits for another thread of its process: the engine's lock taken
/// (``Locked``), another flush under way (`FlushTurns`), durable commits on their way
/// (`DurableCommitWindow`).
///
/// Every thread sleeps there, as usual, but the threads of the tests' deterministic simulation,
/// which runs one simulated thread at a time and switches only where it decides: a thread that
/// slept there would hold the turn while the thread it waits for never runs. Each of those
/// threads installs a waiter, and waits by handing the turn back to the simulation's scheduler,
/// then looks again. The waiter is the calling thread's own (thread-local storage), so no other
/// thread, store or test sees it.
enum CooperativeWaiting {
    /// A simulated thread's way of letting the others run.
    protocol Waiter: AnyObject {
        /// Returns once other threads have had a turn; the caller then looks again.
        func letOthersRun()
        /// A point where the simulation may let other threads run before this one goes on, as a
        /// system call is: where other processes can see shared memory half changed.
        func passPoint(_ name: StaticString)
    }

    /// The calling thread's waiter, if it has one.
    static var current: (any Waiter)? {
        guard let context = ts_cooperative_wait_context() else { return nil }
        return Unmanaged<Box>.fromOpaque(context).takeUnretainedValue().waiter
    }

    /// Installs `waiter` for the calling thread (`nil`: removes it), which must keep a reference
    /// to what this returns until it removes it.
    static func install(_ waiter: (any Waiter)?) -> AnyObject? {
        guard let waiter else {
            ts_set_cooperative_wait(nil, nil)
            return nil
        }
        let box = Box(waiter)
        ts_set_cooperative_wait(
            { context in
                guard let context else { return }
                Unmanaged<Box>.fromOpaque(context).takeUnretainedValue().waiter.letOthersRun()
            }, Unmanaged.passUnretained(box).toOpaque())
        return box
    }

    /// On a simulated thread, lets the simulation run others here (see ``Waiter/passPoint(_:)``);
    /// elsewhere, nothing but a look at a thread-local variable.
    @inline(__always)
    static func point(_ name: StaticString) {
        guard ts_cooperative_wait_context() != nil else { return }
        current?.passPoint(name)
    }

    /// Waits on `condition` (locked by the caller) until it is signalled, or, on a simulated
    /// thread, until the others have had a turn: either way the caller looks again.
    static func wait(on condition: NSCondition) {
        guard let waiter = current else { return condition.wait() }
        condition.unlock()
        waiter.letOthersRun()
        condition.lock()
    }

    private final class Box {
        let waiter: any Waiter
        init(_ waiter: any Waiter) { self.waiter = waiter }
    }
}
