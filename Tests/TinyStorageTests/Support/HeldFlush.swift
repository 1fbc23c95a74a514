import Foundation

@testable import TinyStorage

/// A `FileIO` whose flushes of a file (`fdatasync` on a descriptor) stop inside the call once
/// ``hold()`` was called, until ``finishesWhileHeld(_:)`` lets them go: for tests that something
/// does not wait for a flush under way.
final class HeldFlush: Sendable {
    private let holding = Locked(false)
    private let entered = DispatchSemaphore(value: 0)
    private let released = DispatchSemaphore(value: 0)

    var io: FileIO {
        FileIO { [self] call, path in
            if call == .sync, path == nil, holding.withLock({ $0 }) {
                entered.signal()
                released.wait()
            }
            return nil
        }
    }

    /// From now on, a flush stops inside the call.
    func hold() { holding.withLock { $0 = true } }

    /// Waits until a flush has stopped inside the call.
    func waitUntilHeld() { entered.wait() }

    /// Runs `body` on another thread while the flush stays held, and says whether it finished
    /// within 30 seconds; then lets the flush go (and waits for `body` if it had not finished).
    /// The 30 seconds only keep a broken build from hanging: a `body` that waits for the flush
    /// cannot finish before it is let go.
    func finishesWhileHeld(_ body: @escaping @Sendable () -> Void) -> Bool {
        let done = DispatchSemaphore(value: 0)
        Thread {
            body()
            done.signal()
        }.start()
        let finished = done.wait(timeout: .now() + 30) == .success
        holding.withLock { $0 = false }
        released.signal()
        if !finished { done.wait() }
        return finished
    }
}
