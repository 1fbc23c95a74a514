/// What this instance has announced of values expiring, and when it is to look again. One of
/// the components of ``EngineState``.
///
/// Reads never need it: they compare a value's deadline with the wall clock themselves (see
/// ``LiveEntries``). It exists so that observers (notifications, Observation, value streams)
/// hear that a value expired, as they hear of any other change: each instance asks its clock
/// (``ExpiryClock/wake``) to wake it at the earliest deadline among its entries, then announces
/// the keys whose deadline passed as changed, as an external change without a writeID
/// (`Engine.announceExpiries`, Engine+Expiry.swift).
///
/// **Owns** the moment up to which expiries were announced (``announcedThrough``), a lower bound
/// of the next deadline (``nextDeadline``), and the deadline a wake was asked for (``wakeDeadline``).
///
/// **Guarded by** the engine's lock (`Engine.state`). Deadlines are noted as records are applied
/// (commits, catch-ups, a file read whole); a wake takes the lock, announces, and asks for the
/// next one. A reload keeps this state (`Engine.install`): the announcements belong to the
/// instance, not to the file.
///
/// **Under the lock, code may** note deadlines and ask the clock for a wake (which only schedules,
/// as a change's drain does). **It never** waits for a wake, nor runs one inline.
///
/// Invariants: ``nextDeadline``, when set, is at most the earliest deadline after
/// ``announcedThrough`` among the entries (it may be lower: a key rewritten without a deadline
/// since; a wake then finds nothing, and costs one look); when it is set, a wake is pending for it
/// or an earlier deadline (``wakeDeadline``), once ``Engine.requestExpiryWake(_:)`` has run.
struct ExpiryState {
    /// The wall time (ms since 1970) up to which expired values were announced: an entry whose
    /// deadline is at most this was announced as gone (or was never seen: it had passed when
    /// this instance first read it). Starts at the clock's time when the instance opened.
    var announcedThrough: UInt64 = 0
    /// At most the earliest deadline after ``announcedThrough`` that an entry holds; `nil` when
    /// no entry holds one.
    var nextDeadline: Deadline?
    /// The deadline the clock was asked to wake this instance at, until that wake runs.
    var wakeDeadline: Deadline?

    /// Notes that an entry holds `deadline`.
    mutating func note(_ deadline: Deadline) {
        guard deadline.milliseconds > announcedThrough else { return }
        if let next = nextDeadline, next <= deadline { return }
        nextDeadline = deadline
    }

    /// The deadline to ask the clock for a wake at, noted as asked; `nil` when none is needed (no
    /// deadline ahead, or a wake no later than it is pending).
    mutating func wakeToRequest() -> Deadline? {
        guard let next = nextDeadline else { return nil }
        if let pending = wakeDeadline, pending <= next { return nil }
        wakeDeadline = next
        return next
    }

    /// Whether an entry holding `deadline` (`nil`: none) was announced as present: observers last
    /// heard of its value, not of its expiry.
    @inline(__always)
    func wasAnnounced(_ deadline: Deadline?) -> Bool {
        guard let deadline else { return true }
        return deadline.milliseconds > announcedThrough
    }
}
