import Foundation

// Values that expire: what readers see at a moment (`LiveEntries`), and how observers hear that
// a value expired (a wake at the next deadline, then one external change naming the keys). The
// rules for the state involved are in ExpiryState.swift.

extension Engine {
    /// The wall clock now, in milliseconds since 1970 (``Options/clock``).
    var now: UInt64 { options.clock.now() }

    /// Asks the clock for a wake at the next deadline, unless one no later is pending. Call under
    /// the engine's lock, after deadlines were noted: it only schedules.
    func requestExpiryWake(_ state: inout EngineState) {
        guard let deadline = state.expiry.wakeToRequest() else { return }
        options.clock.wake(deadline) { [weak self] in self?.expiryWakeRan(for: deadline) }
    }

    /// A wake asked for `deadline` ran: announces what expired, then asks for the next wake.
    ///
    /// NB: the store is caught up first, as a read would be, so what expired is judged on the
    /// entries as they are (another process may have rewritten the key meanwhile). A store that
    /// cannot be read announces nothing: when it can again, its reopening announces every key.
    func expiryWakeRan(for deadline: Deadline) {
        withState { state in
            if state.expiry.wakeDeadline == deadline { state.expiry.wakeDeadline = nil }
            do throws(TinyStorageError) {
                try prepare(&state)
            } catch {
                return
            }
            announceExpiries(&state)
            requestExpiryWake(&state)
        }
    }

    /// Queues one external change, without a writeID, naming the keys whose deadline passed since
    /// the last announcement (their values: `nil`), and finds the next deadline. Under the
    /// engine's lock.
    func announceExpiries(_ state: inout EngineState) {
        let now = self.now
        guard let next = state.expiry.nextDeadline, next.hasPassed(at: now) else { return }
        var keys = SmallList<String>()
        var following: Deadline?
        let announcedThrough = state.expiry.announcedThrough
        for (key, entry) in state.index.entries {
            guard let deadline = entry.deadline else { continue }
            if deadline.hasPassed(at: now) {
                if deadline.milliseconds > announcedThrough { keys.append(key) }
            } else if following.map({ deadline < $0 }) ?? true {
                following = deadline
            }
        }
        state.expiry.announcedThrough = max(announcedThrough, now)
        state.expiry.nextDeadline = following
        guard !keys.isEmpty else { return }
        let values: [StoredValue?] = state.changes.carriesValues ? Array(repeating: nil, count: keys.count) : []
        enqueueChange(ChangeSet(keys: keys, values: values, writeID: nil, isExternal: true), in: &state)
    }

    /// The entries a reader sees now: ``withEntries(_:)``'s, for the callers that list or look up.
    func withLiveEntries<R>(_ body: (LiveEntries) -> R) throws(TinyStorageError) -> R {
        let clock = options.clock
        return try withEntries { entries in body(LiveEntries(entries, clock: clock)) }
    }
}

/// The entries as a reader sees them at one moment: an entry whose deadline has passed is absent.
///
/// What every read, listing and commit plan looks at (`Engine.withLiveEntries`, and the plan a
/// commit builds): a value that expired is neither returned, nor listed, nor counted as present
/// by a plan (so `update` starts from `nil`, and register-defaults writes the key again), even
/// while its record is still in the file. The clock is read once, when the view is made: every
/// entry is judged at the same moment.
struct LiveEntries {
    /// Every entry, expired ones included (the file still holds them until a compaction).
    let all: EntryIndex
    /// The moment the view is of (ms since 1970).
    let now: UInt64

    init(_ entries: EntryIndex, clock: ExpiryClock) {
        all = entries
        now = clock.now()
    }

    /// The entry of `key`, or `nil` when it has none or its value has expired.
    subscript(key: String) -> CachedEntry? {
        guard let entry = all[key], !entry.hasExpired(at: now) else { return nil }
        return entry
    }

    /// The keys whose values have not expired, in the order the entries are kept.
    var keys: [String] {
        all.compactMap { $0.value.hasExpired(at: now) ? nil : $0.key }
    }

    /// Whether no entry holds a value that has not expired.
    var isEmpty: Bool {
        !all.contains { !$0.value.hasExpired(at: now) }
    }

    /// Every entry whose value has not expired, transformed, in a dictionary.
    func mapValues<T>(_ transform: (CachedEntry) -> T) -> [String: T] {
        var result: [String: T] = [:]
        for (key, entry) in all where !entry.hasExpired(at: now) { result[key] = transform(entry) }
        return result
    }
}
