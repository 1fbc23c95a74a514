import Foundation

@testable import TinyStorage

/// Runs the threads of simulated processes one at a time, and decides, with a seeded generator,
/// which one runs next at every seam: each call a simulated process makes to its file system
/// (``SimulatedProcess``), and each place a thread waits for another (a lock held, a flush under
/// way: ``CooperativeWaiting``).
///
/// Every simulated thread is a real thread that runs only while it holds the turn; at a seam it
/// hands the turn back and sleeps until it is chosen again. So whatever the machine does, the
/// same seed runs the same interleaving, and a run replays exactly.
///
/// Before each choice the scheduler asks ``beforeChoice`` (the world's faults) whether something
/// happens at this point: a process killed, the power lost, a file deleted.
///
/// A thread is
/// - **ready**: stopped at a seam, may be chosen;
/// - **waiting**: found a lock taken or a flush under way; ready again once another thread ran;
/// - **idle**: a background thread with nothing to do; ready again when given work;
/// - **finished**, or **dead** (its process was killed: it never runs again in the schedule; when
///   the run is over it runs on, every call failing, so that it ends).
final class SimulationScheduler: @unchecked Sendable {
    // @unchecked: every mutable property is touched only holding `condition`, but `beforeChoice`,
    // which runs on the thread holding the turn while no other simulated thread runs.

    enum ThreadState: Equatable {
        case ready, running, waiting, idle, finished, dead
    }

    /// One simulated thread.
    final class SimulatedThread: CooperativeWaiting.Waiter, @unchecked Sendable {
        // @unchecked: `state` and `freeRunning` are touched only holding the scheduler's lock.
        let id: Int
        let name: String
        let process: Int
        unowned let scheduler: SimulationScheduler
        fileprivate(set) var state = ThreadState.ready
        /// Set once the run is over, for threads that did not finish: they run to their end
        /// without the turn, every call failing.
        fileprivate(set) var freeRunning = false

        fileprivate init(id: Int, name: String, process: Int, scheduler: SimulationScheduler) {
            self.id = id
            self.name = name
            self.process = process
            self.scheduler = scheduler
        }

        func letOthersRun() { scheduler.pause(self, becoming: .waiting) }

        func passPoint(_ name: StaticString) {
            guard !freeRunning else { return }
            scheduler.seam(self, "\(name)")
        }

        /// The simulated thread the caller runs on, if any.
        static var current: SimulatedThread? { CooperativeWaiting.current as? SimulatedThread }
    }

    /// Why a run stopped before every thread was done.
    enum Stall: Equatable, CustomStringConvertible {
        /// Every thread left waits for another: nothing can run.
        case deadlock([String])
        var description: String {
            switch self {
            case .deadlock(let names): "deadlock: \(names.joined(separator: ", ")) wait, nothing can run"
            }
        }
    }

    private let condition = NSCondition()
    private var threads: [SimulatedThread] = []
    private var running: SimulatedThread?
    private var generator: SeededGenerator
    private var started = 0
    private var ended = 0
    /// Choices made in a row without a thread passing a seam: past ``waitLimit``, the threads
    /// left are taken to wait for each other.
    private var waitsInARow = 0
    private static let waitLimit = 2_000
    private(set) var stall: Stall?
    /// The scheduler's clock: moved by every choice and by every event the history records, so
    /// that two events never share a time.
    private var clock = 0
    /// Choices made so far.
    private(set) var choices = 0
    /// Called on the thread holding the turn, before each choice, with the choice's number.
    var beforeChoice: (Int) -> Void = { _ in }
    /// What each choice ran, when tracing.
    var trace: ((String) -> Void)?

    init(seed: UInt64) {
        generator = SeededGenerator(seed: seed)
    }

    /// The next time on the scheduler's clock.
    func tick() -> Int {
        condition.lock()
        defer { condition.unlock() }
        clock += 1
        return clock
    }

    // MARK: Threads

    /// Starts a thread named `name` of process `process` running `body`, when the scheduler
    /// chooses it (it is ready from now on).
    @discardableResult
    func spawn(_ name: String, process: Int, _ body: @escaping @Sendable () -> Void) -> SimulatedThread {
        condition.lock()
        let thread = SimulatedThread(id: threads.count, name: name, process: process, scheduler: self)
        threads.append(thread)
        started += 1
        condition.unlock()
        let system = Thread { [self] in
            let installed = CooperativeWaiting.install(thread)
            condition.lock()
            while !(running === thread || thread.freeRunning) { condition.wait() }
            condition.unlock()
            body()
            condition.lock()
            if thread.state != .dead { thread.state = .finished }
            ended += 1
            condition.unlock()
            if !thread.freeRunning { handOver(from: thread) }
            condition.broadcast()
            _ = CooperativeWaiting.install(nil)
            withExtendedLifetime(installed) {}
        }
        system.stackSize = 4 << 20
        system.start()
        return thread
    }

    /// Makes every thread of `process` dead: it never runs again in the schedule.
    func kill(process: Int) {
        condition.lock()
        for thread in threads where thread.process == process && thread.state != .finished {
            thread.state = .dead
        }
        condition.unlock()
    }

    /// Whether `process` was killed.
    func isDead(process: Int) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return threads.contains { $0.process == process && $0.state == .dead }
    }

    /// An idle thread has work: it may be chosen again.
    func wake(_ thread: SimulatedThread) {
        condition.lock()
        if thread.state == .idle { thread.state = .ready }
        condition.unlock()
    }

    // MARK: Seams

    /// A seam: the calling simulated thread stops here until it is chosen again.
    func seam(_ thread: SimulatedThread, _ label: @autoclosure () -> String) {
        if let trace { trace("\(thread.name): \(label())") }
        pause(thread, becoming: .ready)
    }

    /// A background thread has nothing to do: it stops until ``wake(_:)`` and a choice.
    func idle(_ thread: SimulatedThread) { pause(thread, becoming: .idle) }

    /// Hands the turn on and waits for it to come back: the heart of the scheduler.
    fileprivate func pause(_ thread: SimulatedThread, becoming state: ThreadState) {
        condition.lock()
        if thread.freeRunning {
            condition.unlock()
            if state == .waiting { sched_yield() }
            return
        }
        if thread.state != .dead { thread.state = state }
        condition.unlock()
        handOver(from: thread)
        condition.lock()
        while !(running === thread || thread.freeRunning) { condition.wait() }
        if thread.state != .dead { thread.state = .running }
        condition.unlock()
    }

    /// Chooses the next thread to run; called by the thread giving up the turn.
    private func handOver(from thread: SimulatedThread) {
        condition.lock()
        let waiting = thread.state == .waiting
        // NB: any other thread's step may have freed what a waiting thread waits for.
        for other in threads where other !== thread && other.state == .waiting { other.state = .ready }
        waitsInARow = waiting ? waitsInARow + 1 : 0
        choices += 1
        clock += 1
        let choice = choices
        condition.unlock()
        beforeChoice(choice)
        condition.lock()
        defer {
            condition.unlock()
            condition.broadcast()
        }
        let ready = threads.filter { $0.state == .ready }
        guard !ready.isEmpty, waitsInARow < Self.waitLimit else {
            let stuck = threads.filter { $0.state == .waiting || ($0.state == .ready && waitsInARow >= Self.waitLimit) }
            if !stuck.isEmpty, stall == nil { stall = .deadlock(stuck.map(\.name)) }
            running = nil
            return
        }
        let next = ready[Int.random(in: 0..<ready.count, using: &generator)]
        running = next
        next.state = .running
    }

    // MARK: Runs

    /// Runs the threads until none can run: all finished, dead or idle, or a ``stall``.
    func runUntilQuiet() {
        condition.lock()
        let ready = threads.filter { $0.state == .ready }
        guard !ready.isEmpty else {
            condition.unlock()
            return
        }
        let first = ready[Int.random(in: 0..<ready.count, using: &generator)]
        running = first
        first.state = .running
        condition.broadcast()
        while running != nil { condition.wait() }
        condition.unlock()
    }

    /// Lets every thread that did not finish run on to its end without the turn (every call of
    /// a dead process fails), and waits for them.
    func release() {
        condition.lock()
        for thread in threads where thread.state != .finished {
            thread.freeRunning = true
            thread.state = .dead
        }
        condition.broadcast()
        while ended < started { condition.wait() }
        condition.unlock()
    }
}
