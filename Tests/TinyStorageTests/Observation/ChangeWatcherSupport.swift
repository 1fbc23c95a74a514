import Foundation

@testable import TinyStorage

/// A ``ChangeScheduler`` on a virtual clock: nothing runs until the test advances time, so the
/// watcher's later looks can be checked to the millisecond without waiting for them.
final class VirtualScheduler: ChangeScheduler, @unchecked Sendable {
    // @unchecked: every field is touched only while holding `lock`.
    private let lock = NSCondition()
    private var now: Duration = .zero
    private var order = 0
    private var pending: [(time: Duration, order: Int, action: @Sendable () -> Void)] = []

    func run(_ action: @escaping @Sendable () -> Void) { run(after: .zero, action) }

    func run(after delay: Duration, _ action: @escaping @Sendable () -> Void) {
        lock.lock()
        defer { lock.unlock() }
        order += 1
        pending.append((now + delay, order, action))
        lock.broadcast()
    }

    /// Waits until something is scheduled, now or later: from another thread, such as a file
    /// event's. `false` if nothing was within `seconds` (a hang guard, not a measure).
    func waitForWork(seconds: Double = 30) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        let deadline = Date(timeIntervalSinceNow: seconds)
        while pending.isEmpty {
            if !lock.wait(until: deadline) { return !pending.isEmpty }
        }
        return true
    }

    /// Whether nothing is scheduled.
    var isIdle: Bool {
        lock.lock()
        defer { lock.unlock() }
        return pending.isEmpty
    }

    /// The virtual time now.
    var time: Duration {
        lock.lock()
        defer { lock.unlock() }
        return now
    }

    /// Runs, in time order, everything due up to `delay` from now (including what those actions
    /// schedule), and leaves the clock there.
    func advance(by delay: Duration = .zero) {
        lock.lock()
        let target = now + delay
        lock.unlock()
        while true {
            lock.lock()
            guard
                let next = pending.filter({ $0.time <= target }).min(by: { ($0.time, $0.order) < ($1.time, $1.order) })
            else {
                now = target
                lock.unlock()
                return
            }
            pending.removeAll { $0.order == next.order }
            now = next.time
            lock.unlock()
            next.action()
        }
    }

    /// Runs everything, however far in the future.
    func runAll() { advance(by: .seconds(3600)) }
}

/// An event source a test drives by hand, recording what the watcher asks of it.
final class ScriptedSource: ChangeEventSource, @unchecked Sendable {
    // @unchecked: every field is touched only while holding `lock`.
    private let lock = NSCondition()
    private var sink: ChangeEventSink?
    private var refusals: Int
    private(set) var starts = 0
    private(set) var stops = 0
    private(set) var rearms = 0

    /// - Parameter refusals: How many times `start` fails before it succeeds (a store not open yet).
    init(refusals: Int = 0) { self.refusals = refusals }

    /// Runs inside each `start`, outside the source's lock.
    nonisolated(unsafe) var duringStart: () -> Void = {}

    func start(reportingTo sink: ChangeEventSink) -> Bool {
        duringStart()
        lock.lock()
        defer { lock.unlock() }
        starts += 1
        if refusals > 0 {
            refusals -= 1
            return false
        }
        self.sink = sink
        return true
    }

    func rearm() {
        lock.lock()
        defer { lock.unlock() }
        rearms += 1
    }

    func stop() {
        lock.lock()
        defer { lock.unlock() }
        stops += 1
        sink = nil
    }

    var isWatching: Bool {
        lock.lock()
        defer { lock.unlock() }
        return sink != nil
    }

    /// Reports `event` as the platform would, if the source is watching; returns whether it was.
    @discardableResult
    func emit(_ event: ChangeEvent) -> Bool {
        lock.lock()
        let sink = self.sink
        lock.unlock()
        sink?.receive(event)
        return sink != nil
    }
}

/// A source whose watch can be lost, like a directory watch.
final class ScriptedLosableSource: ChangeEventSource, LosableSource, @unchecked Sendable {
    let scripted: ScriptedSource

    init(refusals: Int = 0) { scripted = ScriptedSource(refusals: refusals) }

    func start(reportingTo sink: ChangeEventSink) -> Bool { scripted.start(reportingTo: sink) }
    func rearm() { scripted.rearm() }
    func stop() { scripted.stop() }
    @discardableResult func emit(_ event: ChangeEvent) -> Bool { scripted.emit(event) }
}

/// Records the virtual times at which the watcher looked.
final class LookLog: @unchecked Sendable {
    // @unchecked: `times` is only touched while holding `lock`.
    private let lock = NSLock()
    private var times: [Duration] = []
    let scheduler: VirtualScheduler

    init(_ scheduler: VirtualScheduler) { self.scheduler = scheduler }

    func look() {
        let now = scheduler.time
        lock.lock()
        times.append(now)
        lock.unlock()
    }

    var looks: [Duration] {
        lock.lock()
        defer { lock.unlock() }
        return times
    }
}
