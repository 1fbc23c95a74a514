import Foundation

@testable import TinyStorage

/// A wall clock a test sets by hand, and the wakes a store asked it for, run when the test says
/// so: expiry tested without waiting for time to pass (``Engine/Options/clock``).
final class ManualClock: Sendable {
    private struct State {
        var now: UInt64
        var wakes: [(deadline: Deadline, action: @Sendable () -> Void)] = []
    }

    private let state: Locked<State>

    /// A clock reading `now` (milliseconds since 1970): by default 2025-01-01 00:00 UTC.
    init(now: UInt64 = 1_735_689_600_000) {
        state = Locked(State(now: now))
    }

    /// The time now, in milliseconds since 1970.
    var now: UInt64 { state.withLock { $0.now } }

    /// The clock a store is given.
    var expiryClock: ExpiryClock {
        ExpiryClock(
            now: { [state] in state.withLock { $0.now } },
            wake: { [state] deadline, action in state.withLock { $0.wakes.append((deadline, action)) } })
    }

    /// Store options with this clock, and without threads of the store's own that would notice
    /// other instances' commits (tests that want them say so).
    func options(watchesChanges: Bool = false) -> Engine.Options {
        var options = Engine.Options(watchesChanges: watchesChanges)
        options.clock = expiryClock
        return options
    }

    /// Moves the clock by `milliseconds` (back when negative).
    func advance(by milliseconds: Int64) {
        state.withLock { $0.now = UInt64(Int64($0.now) + milliseconds) }
    }

    /// The deadlines of the wakes asked for and not run yet, earliest first.
    var pendingWakes: [Deadline] {
        state.withLock { $0.wakes.map(\.deadline).sorted() }
    }

    /// Runs the wakes whose deadline the clock has reached (a store asks for the next one as it
    /// runs; that one runs too if due), and returns how many ran.
    @discardableResult
    func runDueWakes() -> Int {
        var ran = 0
        while let action = state.withLock({ state -> (@Sendable () -> Void)? in
            guard let index = state.wakes.firstIndex(where: { $0.deadline.hasPassed(at: state.now) }) else {
                return nil
            }
            return state.wakes.remove(at: index).action
        }) {
            action()
            ran += 1
        }
        return ran
    }
}
