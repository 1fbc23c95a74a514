#if os(Linux) || os(Android)
import Foundation

/// Linux: reports each commit published by any process, by sleeping on the change signal in the
/// store's shared page (a futex) on a thread of its own (see ``ChangeEventSource``).
///
/// Writers bump the signal after publishing, so a look finds the commit: no later look is
/// needed, and no file event either (a commit written through a memory mapping makes none). A
/// writer makes a system call only when a thread is asleep on the signal; after each wake-up this
/// source pauses for ``coalescingPause`` before it sleeps again, so a burst of commits costs about
/// one wake-up per pause, whoever writes.
final class SignalEventSource: ChangeEventSource {
    /// How long the source stays awake after a wake-up, reporting what arrives meanwhile at once.
    static let coalescingPause: Duration = .milliseconds(1)

    private let coordination: @Sendable () -> CoordinationFile?
    private let runner = Locked<Runner?>(nil)

    /// - Parameter coordination: The store's shared page, once the store is open.
    init(coordination: @escaping @Sendable () -> CoordinationFile?) {
        self.coordination = coordination
    }

    func start(reportingTo sink: ChangeEventSink) -> Bool {
        guard let file = coordination() else { return false }
        let started = runner.withLock { current -> Runner? in
            if let current, current.file === file { return nil }
            current?.stop()
            // NB: the signal is read here, on the caller's thread, not when the new thread first
            // runs: a commit published in between would otherwise count as seen, and never be
            // reported (the store's owner relies on no event after `start` being missed).
            current = Runner(file: file, sink: sink, seen: file.changeSignal)
            return current
        }
        started?.launch()
        return true
    }

    func rearm() {}

    func stop() {
        runner.withLock { current in
            current?.stop()
            current = nil
        }
    }

    /// One sleeping thread and its stop flag.
    private final class Runner: Sendable {
        let file: CoordinationFile
        let sink: ChangeEventSink
        /// The signal's value when the source started.
        let initialSignal: UInt32
        private let stopped = Locked(false)

        init(file: CoordinationFile, sink: ChangeEventSink, seen: UInt32) {
            self.file = file
            self.sink = sink
            self.initialSignal = seen
        }

        func launch() {
            let thread = Thread { [self] in run() }
            thread.name = "TinyStorage.changeSignal"
            thread.stackSize = 64 << 10
            thread.start()
        }

        func stop() {
            stopped.withLock { $0 = true }
            file.wakeWaiters()
        }

        private func run() {
            var seen = initialSignal
            while !stopped.withLock({ $0 }) {
                file.waitForChange(after: seen, timeoutMilliseconds: 2_000)
                let now = file.changeSignal
                guard now != seen else { continue }
                seen = now
                sink.receive(.published)
                // NB: not synchronization: while awake, writers see no sleeper and skip the wake-up
                // call; what they publish meanwhile is reported right after the pause.
                let (seconds, attoseconds) = SignalEventSource.coalescingPause.components
                usleep(UInt32(seconds) * 1_000_000 + UInt32(attoseconds / 1_000_000_000_000))
            }
        }
    }
}
#endif
