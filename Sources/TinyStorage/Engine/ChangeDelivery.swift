import Dispatch

/// Receives the engine's change sets.
protocol EngineListener: AnyObject, Sendable {
    func engineDidChange(_ change: ChangeSet)
}

/// Delivers change sets to a listener on a serial queue, one per commit, in commit order.
///
/// NB: posting a `Notification` costs more than a whole commit (over a microsecond on Linux), so
/// committing threads only append to a list, and a queue drains it about a millisecond later, so a
/// burst of commits costs one thread wake-up, not one each. Observers therefore run on a
/// background thread, never inside a store call, and never while the store holds a lock.
final class ChangeDelivery: Sendable {
    private struct State {
        weak var listener: (any EngineListener)?
        var pending: [ChangeSet] = []
        var scheduled = false
        var lastSequence: UInt64 = 0
    }

    private let state = Locked(State())
    private let queue = DispatchQueue(label: "TinyStorage.changeDelivery", qos: .utility)
    /// How long changes may gather before they are delivered.
    static let batchingDelay: DispatchTimeInterval = .milliseconds(1)

    func setListener(_ listener: any EngineListener) {
        state.withLock { $0.listener = listener }
    }

    /// Queues `change` for delivery and numbers it. Call with the engine's lock held, so the
    /// numbering and the delivery order are the commit order.
    func enqueue(_ change: ChangeSet) {
        let schedule = state.withLock { state in
            guard state.listener != nil else { return false }
            state.lastSequence += 1
            var change = change
            change.sequence = state.lastSequence
            state.pending.append(change)
            defer { state.scheduled = true }
            return !state.scheduled
        }
        if schedule { queue.asyncAfter(deadline: .now() + Self.batchingDelay) { self.drain() } }
    }

    /// The number of the last change queued. Changes numbered up to it are already reflected in
    /// the engine's state when read under the engine's lock.
    var lastSequence: UInt64 { state.withLock { $0.lastSequence } }

    private func drain() {
        let (batch, listener) = state.withLock { state in
            defer {
                state.pending.removeAll(keepingCapacity: true)
                state.scheduled = false
            }
            return (state.pending, state.listener)
        }
        guard let listener else { return }
        for change in batch { listener.engineDidChange(change) }
    }

    /// Blocks until every change enqueued before this call has been delivered.
    func waitUntilDelivered() {
        if state.withLock({ $0.scheduled }) { queue.sync { drain() } } else { queue.sync {} }
    }
}
