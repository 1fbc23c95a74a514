import Foundation

/// The `.immediate` commits of one store in this process that have begun but not yet appended:
/// what a flush about to begin waits for, briefly, so that it covers them too (group commit).
///
/// NB: without the wait, the threads a flush wakes commit again at once, and the first of them
/// to ask for a flush takes the next one alone, before the others have appended: four threads'
/// durable commits shared a flush between about two. The wait ends as soon as no commit is on
/// its way, and after a fifth of a millisecond in any case, so a commit held up elsewhere (behind a
/// compaction, say) delays a flush by that much at most; a lone commit never waits.
final class DurableCommitWindow: @unchecked Sendable {
    // @unchecked: `inFlight` is only touched holding `condition`.
    private let condition = NSCondition()
    private var inFlight = 0
    private var gathering = 0
    private let longestWait: TimeInterval

    /// - Parameter longestWait: Much less than a flush (100–250 µs on the disks measured), more
    ///   than an append takes.
    init(longestWait: TimeInterval = 0.000_2) {
        self.longestWait = longestWait
    }

    /// A durable commit's place in the window, from its start until ``leave()``.
    final class Ticket {
        private let window: DurableCommitWindow
        private var left = false

        fileprivate init(_ window: DurableCommitWindow) {
            self.window = window
        }

        /// The commit appended its record (a flush that begins now covers it), or ends without
        /// one, or hands over to another path that takes a ticket of its own. Only the first
        /// call counts, so every way out of a commit may call it.
        func leave() {
            guard !left else { return }
            left = true
            window.leave()
        }
    }

    /// A durable commit begins: before it waits for the store's lock.
    func enter() -> Ticket {
        condition.lock()
        inFlight += 1
        condition.unlock()
        return Ticket(self)
    }

    private func leave() {
        condition.lock()
        inFlight -= 1
        if inFlight == 0 { condition.broadcast() }
        condition.unlock()
    }

    /// Waits until no durable commit is on its way, at most `longestWait`. Call with no lock
    /// held, once a flush's turn has come and before it reads how far it reaches.
    func gather() {
        condition.lock()
        defer { condition.unlock() }
        guard inFlight > 0 else { return }
        gathering += 1
        defer { gathering -= 1 }
        // NB: a thread of the tests' simulation lets the others run once instead (they cannot
        // run while it waits on the clock).
        if CooperativeWaiting.current != nil { return CooperativeWaiting.wait(on: condition) }
        let deadline = Date(timeIntervalSinceNow: longestWait)
        while inFlight > 0, condition.wait(until: deadline) {}
    }

    /// For tests: whether a flush is waiting in ``gather()``.
    var isGathering: Bool {
        condition.lock()
        defer { condition.unlock() }
        return gathering > 0
    }
}
