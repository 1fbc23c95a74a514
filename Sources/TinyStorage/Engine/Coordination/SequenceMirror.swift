import CTinyStorageShims

/// A lock-free copy of the shared counter value an engine's state has caught up to.
///
/// The change monitor wakes up for every write to the store's directory, most of them this
/// process's own commits. Comparing the shared counter with this copy tells it, without taking the
/// engine's lock, that there is nothing to do.
final class SequenceMirror: @unchecked Sendable {
    // @unchecked: `seen` is only accessed with atomic loads and stores; `coordination` is set once
    // under `attachment`'s lock and never replaced.
    private let seen = UnsafeMutablePointer<UInt64>.allocate(capacity: 1)
    private let attachment = Locked<CoordinationFile?>(nil)

    init() { seen.initialize(to: 0) }

    deinit { seen.deallocate() }

    func attach(_ coordination: CoordinationFile) {
        attachment.withLock { if $0 == nil { $0 = coordination } }
    }

    func store(_ sequence: UInt64) { ts_atomic_store_u64(seen, sequence) }

    /// Whether no process has committed since the state last caught up. `false` before opening.
    var isCurrent: Bool {
        guard let coordination = attachment.withLock({ $0 }) else { return false }
        return coordination.sequence == ts_atomic_load_u64(seen)
    }
}
