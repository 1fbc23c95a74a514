import Dispatch
package import Foundation

/// The moment a stored value stops being readable: a time of the wall clock, in milliseconds
/// since 1970-01-01 00:00 UTC, stored with the value (format version 3, see ``LogFormat``), so
/// every process and every later launch reads the same moment.
///
/// At or past it, the value reads as absent. The wall clock decides, not a timer: a value whose
/// deadline passed reads as absent at once, whether or not anyone has announced it yet.
package struct Deadline: Hashable, Comparable, Sendable {
    /// Milliseconds since 1970-01-01 00:00 UTC, at most ``maximumMilliseconds``.
    package let milliseconds: UInt64

    /// The latest deadline there is: 2^48 − 1 ms after 1970, in the year 10889. Later ones are
    /// taken as it, so that a key's deadline fits the 48 bits its entry keeps it in (see
    /// ``CachedEntry``).
    static let maximumMilliseconds: UInt64 = 1 << 48 - 1

    /// The deadline `milliseconds` after 1970, made no later than ``maximumMilliseconds``; `nil`
    /// for 0, which an entry uses to say it has none (and which has long passed anyway).
    package init?(milliseconds: UInt64) {
        guard milliseconds > 0 else { return nil }
        self.milliseconds = min(milliseconds, Self.maximumMilliseconds)
    }

    /// The deadline `lifetime` after `now` (milliseconds since 1970), rounded up to the next
    /// millisecond: a positive lifetime always ends after `now`.
    ///
    /// - Precondition: `lifetime` is positive (the API checks it, see `TinyStorage.deadline(after:)`).
    init(after lifetime: Duration, from now: UInt64) {
        let (seconds, attoseconds) = lifetime.components
        // NB: in 64 bits throughout, and saturating: a lifetime of centuries is no error, it
        // ends at the latest deadline there is.
        let whole = UInt64(clamping: seconds).multipliedReportingOverflow(by: 1000)
        let fraction = UInt64(clamping: attoseconds)
        let perMillisecond: UInt64 = 1_000_000_000_000_000
        let partial = (fraction + perMillisecond - 1) / perMillisecond
        let lifetimeMilliseconds = whole.overflow ? UInt64.max : whole.partialValue &+ partial
        let sum = now.addingReportingOverflow(max(lifetimeMilliseconds, 1))
        self.milliseconds = min(sum.overflow ? .max : sum.partialValue, Self.maximumMilliseconds)
    }

    /// Whether the deadline has come at `now` (milliseconds since 1970): reads then find no value.
    @inline(__always)
    func hasPassed(at now: UInt64) -> Bool { now >= milliseconds }

    /// The deadline as a `Date`.
    package var date: Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    package static func < (lhs: Self, rhs: Self) -> Bool { lhs.milliseconds < rhs.milliseconds }
}

/// The wall clock expiry is measured by, and how the store is woken when a deadline comes: the
/// system's, or a test's, which sets the time by hand and decides when a wake runs.
///
/// NB: one value handed to the engine (``Engine/Options/clock``), as its other schedulers are, so
/// that time-based behaviour is deterministic in tests and in the simulation (which runs no
/// thread outside its schedule: its clock never wakes anyone).
struct ExpiryClock: Sendable {
    /// The wall clock now, in milliseconds since 1970-01-01 00:00 UTC.
    var now: @Sendable () -> UInt64
    /// Runs `action` once, on a thread of its own, when the wall clock reaches `deadline`, or a
    /// little later. It may run early (the clock was set back since): the action checks the
    /// clock again.
    var wake: @Sendable (_ deadline: Deadline, _ action: @escaping @Sendable () -> Void) -> Void

    /// The system's wall clock (`clock_gettime(CLOCK_REALTIME)`, through `Date`) and wall-time
    /// dispatch timers (`DispatchWallTime`), which, unlike uptime, go on while the device sleeps.
    static let system = ExpiryClock(
        now: { UInt64(clamping: Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))) },
        wake: { deadline, action in
            let seconds = Int(clamping: deadline.milliseconds / 1000)
            let nanoseconds = Int(clamping: deadline.milliseconds % 1000 * 1_000_000)
            let wallTime = DispatchWallTime(timespec: timespec(tv_sec: seconds, tv_nsec: nanoseconds))
            expiryQueue.asyncAfter(wallDeadline: wallTime, execute: action)
        })

    /// Where the system clock's wakes run, for every store: each one only queues a change.
    private static let expiryQueue = DispatchQueue(label: "TinyStorage.expiry", qos: .utility)
}
