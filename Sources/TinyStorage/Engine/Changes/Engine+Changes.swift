import Foundation

// Changes in and out of the engine: a commit's or catch-up's change is queued under the engine's
// lock (`enqueueChange`, into ``PendingChanges``) and announced by ``ChangeDelivery`` with no
// lock held; the change watch's look (`filesDidChange`) catches up when another process commits.

extension Engine {
    /// Tells `listener` about every change, local or external, outside all locks.
    func setListener(_ listener: any EngineListener) {
        delivery.setListener(listener)
    }

    /// Queues `change` for the listener and numbers it. Call under the engine's lock, as every
    /// commit and catch-up does: so changes are numbered and delivered in commit order.
    func enqueueChange(_ change: ChangeSet, in state: inout EngineState) {
        if state.changes.append(change) { delivery.scheduleDrain() }
    }

    /// Queues the change `make` builds, given its number (see ``PendingChanges/append(_:)``).
    @inline(__always)
    func enqueueChange(in state: inout EngineState, _ make: (_ sequence: UInt64) -> ChangeSet) {
        if state.changes.append(make) { delivery.scheduleDrain() }
    }

    /// Makes every change set from now on carry the values of its keys, not only the keys.
    ///
    /// NB: only value streams read them, so until one is opened commits skip collecting them.
    /// Under the engine's lock, which every commit holds while it builds its change set: a
    /// change numbered after a `delivery.lastSequence` read once this returns carries them.
    func carryValuesInChanges() {
        state.withLock { $0.changes.carriesValues = true }
    }

    /// Called by the change watcher: catch up with other processes' commits, or try to open a
    /// store that was unavailable, so observers hear about it within milliseconds.
    func filesDidChange() -> LookFinding {
        // NB: many events come from this process's own commits; answering those without the
        // engine's lock keeps the watcher from contending with writers and readers.
        if !mirror.isCurrent {
            withState { state in
                do throws(TinyStorageError) {
                    try prepare(&state)
                } catch {
                    // Reported through availability and the next call.
                }
            }
        }
        // NB: where commits are signalled (Linux), a file event is no commit's; where they are
        // not (Apple platforms' vnode events), every commit makes one, and a settled file spares
        // four later wake-ups.
        guard options.platform.fileEvents == .vnode else { return .unsettled }
        let log = withState { state -> (file: DataFile, end: Int)? in
            guard state.recovery.failure == nil, let file = state.log.dataFile,
                let coordination = state.coordination.file,
                !coordination.reportsDeadHolders || file.allowsMappedAppendsIfKnown == false
            else { return nil }
            return (file, state.log.end)
        }
        // NB: appended with `pwrite`, a record makes the file longer before it is published:
        // nothing past the log read means no writer is between the two.
        guard let log, case .success(let status) = io.status(log.file.fd), status.size <= log.end else {
            return .unsettled
        }
        return .settled
    }
}

/// The engine's state as the lock of its delivery's pending changes (see ``PendingChanges``).
final class PendingChangesInState: PendingChangesLock {
    private let state: Locked<EngineState>
    private let clock: ExpiryClock

    init(_ state: Locked<EngineState>, clock: ExpiryClock) {
        self.state = state
        self.clock = clock
    }

    func withPendingChanges<R>(_ body: (inout PendingChanges) -> R) -> R {
        state.withLock { body(&$0.changes) }
    }

    func everyKey() -> [(key: String, value: StoredValue?)] {
        state.withLock { state in
            let now = clock.now()
            return state.index.entries.map {
                (key: $0.key, value: $0.value.hasExpired(at: now) ? nil : $0.value.stored)
            }
        }
    }
}
