import Dispatch

/// What an event source reports. Sources only say that something happened; the watcher decides
/// what to do about it.
enum ChangeEvent: Sendable, Hashable {
    /// A process published a commit (a direct signal, sent after the commit is visible): look now.
    case published
    /// A file in the store's folder was written: look now and, since a writer appends before it
    /// publishes, look again a little later.
    case activity
    /// A name in the folder was created, renamed or removed (a compaction, a repair, a restored
    /// file): look, look again later, and re-arm whatever watches a file by its identity.
    case namesChanged
    /// The source stopped watching (its directory was removed or replaced, or the system dropped
    /// events): look, and start the source again.
    case lost
}

/// A platform's way of noticing changes: inotify, a futex in the shared page, kqueue vnode events.
///
/// A source only reports events; coalescing, later looks, re-arming, restarting and the watch's
/// lifetime are the ``ChangeWatcher``'s. Sources may call ``ChangeEventSink/receive(_:)`` from any
/// thread, at any time, and are never called back synchronously from it.
protocol ChangeEventSource: AnyObject, Sendable {
    /// Begins reporting to `sink`. Returns `false` when the system refuses (the directory is
    /// missing, a limit is reached); the watcher tries again later.
    func start(reportingTo sink: ChangeEventSink) -> Bool
    /// Watches again whatever the source watches by identity (a file replaced under its name).
    func rearm()
    /// Stops reporting. Safe to call more than once, and from any thread.
    func stop()
}

/// Where sources report; holds the watcher weakly, so a source never keeps a store alive.
final class ChangeEventSink: Sendable {
    private let watcher: WeakWatcher

    fileprivate init(_ watcher: ChangeWatcher) { self.watcher = WeakWatcher(watcher) }

    /// Reports `event`. Returns at once: the watcher handles it on its own queue.
    func receive(_ event: ChangeEvent) { watcher.value?.receive(event) }
}

private final class WeakWatcher: Sendable {
    private let box: Locked<Weak>
    private struct Weak { weak var watcher: ChangeWatcher? }

    init(_ watcher: ChangeWatcher) { box = Locked(Weak(watcher: watcher)) }

    var value: ChangeWatcher? { box.withLock { $0.watcher } }
}

/// Runs the watcher's work, one piece at a time, now or after a delay. Production uses a serial
/// `DispatchQueue`; tests use a virtual clock.
protocol ChangeScheduler: Sendable {
    /// Runs `action` soon, after every action scheduled before it.
    func run(_ action: @escaping @Sendable () -> Void)
    /// Runs `action` once `delay` has passed.
    func run(after delay: Duration, _ action: @escaping @Sendable () -> Void)
}

/// A serial dispatch queue as a ``ChangeScheduler``.
struct QueueScheduler: ChangeScheduler {
    let queue: DispatchQueue

    func run(_ action: @escaping @Sendable () -> Void) { queue.async(execute: action) }

    func run(after delay: Duration, _ action: @escaping @Sendable () -> Void) {
        // NB: in milliseconds, computed in 64 bits: nanoseconds in an `Int` overflow past 2.1 s
        // where it has 32 bits (watchOS).
        let (seconds, attoseconds) = delay.components
        let milliseconds =
            seconds.multipliedReportingOverflow(by: 1000).partialValue + attoseconds / 1_000_000_000_000_000
        queue.asyncAfter(deadline: .now() + .milliseconds(Int(clamping: milliseconds)), execute: action)
    }
}

/// What a look found, for the looks after it.
enum LookFinding: Sendable, Equatable {
    /// The data file holds nothing past the log the store has read: no writer is between its
    /// append and its publish, so later looks would find nothing the next event does not bring.
    case settled
    /// Bytes past the log (a writer between its append and its publish, a dead process's
    /// remains, space allocated ahead), or the store could not tell: later looks may find more.
    case unsettled
}

/// Turns a store's change events into looks at the store, on every platform alike.
///
/// - A look asks the store whether another process committed (``look``); the store answers
///   from its lock-free copy of the shared counter when nothing did, so spurious looks are cheap.
/// - After a file event, a look follows at once and, when it finds the file unsettled (see
///   ``LookFinding``), later ones (``lateLookDelays``): a writer appends (the event) before it
///   publishes (no event), and may be descheduled between the two. A look that finds every
///   append published (this process's own commits, a writer that published before the look)
///   needs none: on Apple platforms every commit makes an event, and a chain of four wake-ups
///   after each one cost battery for nothing. One chain of later looks runs at a time; an event
///   during a chain starts another when it ends, so the last look always comes at least two
///   seconds after the last event. Names changed or a watch lost always start a chain. A direct
///   signal is sent after publishing and needs no later look.
/// - Events that arrive while a look is pending share it.
/// - After names change, sources that watch a file by identity are re-armed; a source that lost
///   its watch, or could not start, is started again at each look.
///
/// The watcher belongs to a store for the store's whole life: reloading or reopening never drops
/// it. All its state is touched on its scheduler only, and sources only ever hand it events
/// asynchronously, so no source can deadlock against it.
final class ChangeWatcher: Sendable {
    static let lateLookDelays: [Duration] = [.milliseconds(20), .milliseconds(100), .milliseconds(500), .seconds(2)]

    private let sources: [any ChangeEventSource]
    private let scheduler: any ChangeScheduler
    private let look: @Sendable () -> LookFinding

    private struct State {
        var running = false
        /// Sources not watching right now (never started, refused, or lost).
        var idle: Set<Int> = []
        var lookPending = false
        /// A file was written since the last look began: its look decides on later looks.
        var activitySinceLook = false
        var chainRunning = false
        var eventDuringChain = false
    }

    private let state = Locked(State())
    /// Held while sources are started, so two threads never start one source twice (a second
    /// start would leave the first one's watch registered, and never stopped). Internal for a
    /// test that sees a thread wait for it.
    let starting = Locked(())

    /// - Parameters:
    ///   - sources: The platform's event sources for one store.
    ///   - scheduler: Where the watcher's work runs.
    ///   - look: Asks the store to look for changes, and what it found; called on the scheduler,
    ///     never under a lock.
    init(
        sources: [any ChangeEventSource], scheduler: any ChangeScheduler,
        look: @escaping @Sendable () -> LookFinding
    ) {
        self.sources = sources
        self.scheduler = scheduler
        self.look = look
        state.withLock { $0.idle = Set(sources.indices) }
    }

    deinit {
        for source in sources { source.stop() }
    }

    /// Starts, on the calling thread, every source that is not watching yet, so no event after
    /// this call is missed. Call again after the store opens: a source that needs the store's
    /// files (the shared page) can only start then.
    func start() {
        startIdleSources()
    }

    /// Starts every source that is not watching yet on the scheduler, then looks once.
    ///
    /// For a store that has just opened. A commit published between this call and the sources'
    /// start makes no event, but the look that follows the start finds it, since a look compares
    /// the shared counter with what the store has seen: nothing committed after the open goes
    /// unannounced, as with ``start()``.
    ///
    /// NB: starting the sources (a thread for the signal, an inotify watch) took about a fifth of
    /// a cold open on the opening thread; an app opening its store at launch does not wait for it.
    func startSoon() {
        scheduler.run { [weak self] in _ = self?.lookNow() }
    }

    /// Handles `event` on the scheduler. Callable from any thread.
    func receive(_ event: ChangeEvent) {
        scheduler.run { [weak self] in self?.handle(event) }
    }

    // MARK: On the scheduler

    private func handle(_ event: ChangeEvent) {
        switch event {
        case .published:
            break
        case .activity:
            state.withLock { $0.activitySinceLook = true }
        case .namesChanged:
            for source in sources { source.rearm() }
            scheduleLateLooks()
        case .lost:
            for (index, source) in sources.enumerated() where source is any LosableSource {
                source.stop()
                state.withLock { _ = $0.idle.insert(index) }
            }
            scheduleLateLooks()
        }
        lookSoon()
    }

    /// Looks once, soon; events arriving before that look share it.
    private func lookSoon() {
        let schedule = state.withLock { state in
            if state.lookPending { return false }
            state.lookPending = true
            return true
        }
        guard schedule else { return }
        scheduler.run { [weak self] in
            guard let self else { return }
            let activity = state.withLock { state in
                state.lookPending = false
                defer { state.activitySinceLook = false }
                return state.activitySinceLook
            }
            if lookNow() == .unsettled, activity { scheduleLateLooks() }
        }
    }

    private func lookNow() -> LookFinding {
        startIdleSources()
        return look()
    }

    private func startIdleSources() {
        // NB: sources report events through the scheduler, never on the thread that starts them,
        // so nothing here waits for itself.
        starting.withLock { _ in
            let idle = state.withLock { state -> [Int] in
                state.running = true
                return Array(state.idle)
            }
            guard !idle.isEmpty else { return }
            let sink = ChangeEventSink(self)
            for index in idle.sorted() where sources[index].start(reportingTo: sink) {
                state.withLock { _ = $0.idle.remove(index) }
            }
        }
    }

    private func scheduleLateLooks() {
        let start = state.withLock { state in
            if state.chainRunning {
                state.eventDuringChain = true
                return false
            }
            state.chainRunning = true
            return true
        }
        guard start else { return }
        for (index, delay) in Self.lateLookDelays.enumerated() {
            scheduler.run(after: delay) { [weak self] in
                guard let self else { return }
                _ = lookNow()
                guard index == Self.lateLookDelays.count - 1 else { return }
                let again = state.withLock { state in
                    state.chainRunning = false
                    defer { state.eventDuringChain = false }
                    return state.eventDuringChain
                }
                if again { scheduleLateLooks() }
            }
        }
    }
}

/// A source whose watch can be lost (its directory removed or replaced), and must then be
/// started again from scratch.
protocol LosableSource: ChangeEventSource {}
