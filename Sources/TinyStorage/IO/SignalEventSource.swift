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
    /// How often a polling source looks at the signal.
    static let pollingInterval: Duration = .milliseconds(5)

    private let coordination: @Sendable () -> CoordinationFile?
    private let polling: Bool
    private let runner = Locked<Runner?>(nil)

    /// - Parameters:
    ///   - polling: Look at the signal every ``pollingInterval`` instead of sleeping on it: for a
    ///     read-only store, whose page is mapped read-only. A sleeper raises a flag in the page so
    ///     that writers wake it; one that cannot write the page would never be woken.
    ///   - coordination: The store's shared page, once the store is open.
    init(polling: Bool = false, coordination: @escaping @Sendable () -> CoordinationFile?) {
        self.polling = polling
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
            current = Runner(file: file, sink: sink, seen: file.changeSignal, polling: polling)
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
        let polling: Bool
        private let stopped = Locked(false)

        init(file: CoordinationFile, sink: ChangeEventSink, seen: UInt32, polling: Bool) {
            self.file = file
            self.sink = sink
            self.initialSignal = seen
            self.polling = polling
        }

        func launch() {
            let thread = Thread { [self] in run() }
            thread.name = "TinyStorage.changeSignal"
            thread.stackSize = 64 << 10
            thread.start()
        }

        func stop() {
            stopped.withLock { $0 = true }
            if !polling { file.wakeWaiters() }
        }

        private func run() {
            var seen = initialSignal
            while !stopped.withLock({ $0 }) {
                if polling {
                    Self.pause(SignalEventSource.pollingInterval)
                } else {
                    file.waitForChange(after: seen, timeoutMilliseconds: 2_000)
                }
                let now = file.changeSignal
                guard now != seen else { continue }
                seen = now
                sink.receive(.published)
                // NB: not synchronization: while awake, writers see no sleeper and skip the wake-up
                // call; what they publish meanwhile is reported right after the pause.
                Self.pause(SignalEventSource.coalescingPause)
            }
        }

        private static func pause(_ duration: Duration) {
            let (seconds, attoseconds) = duration.components
            usleep(UInt32(seconds) * 1_000_000 + UInt32(attoseconds / 1_000_000_000_000))
        }
    }
}
#endif
