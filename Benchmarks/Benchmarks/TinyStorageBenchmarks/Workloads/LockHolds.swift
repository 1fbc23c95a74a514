import Benchmark
import Dispatch
import Foundation
@_spi(Benchmarks) import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// (g) Issue 10's lock figure: how long each hold of a store's cross-process lock lasts while
/// commits, updates and compactions run in this process and in another one on the same store,
/// with `.standard` and with `.immediate` durability. Every hold in both processes is recorded
/// (`TinyStorage._startRecordingLockHolds()`, a benchmark hook of the library).
func registerLockHoldBenchmarks() {
    registerLockHolds(.standard)
    registerLockHolds(.immediate)
}

/// How long one hold of the cross-process lock lasted, in nanoseconds: one sample per hold, from
/// both processes.
let lockHold = BenchmarkMetric.custom("lock hold (ns)", useScalingFactor: false)
/// Holds longer than issue 10's 1 ms (one sample per run).
let longLockHolds = BenchmarkMetric.custom("holds over 1 ms (times)", useScalingFactor: false)
/// What ran meanwhile in both processes (one sample each per run).
let heldCommits = BenchmarkMetric.custom("commits (times)", useScalingFactor: false)
let heldUpdates = BenchmarkMetric.custom("updates (times)", useScalingFactor: false)
let heldCompactions = BenchmarkMetric.custom("compactions (times)", useScalingFactor: false)
/// How often the kernel took a CPU away from a thread of either process that could have gone on
/// running (`getrusage(2)`'s `ru_nivcsw`): a hold interrupted that way lasts at least a time slice.
let preemptions = BenchmarkMetric.custom("involuntary context switches (times)", useScalingFactor: false)

extension TinyStorage.Durability {
    /// `.standard` / `.immediate`, as benchmark names and the other process's role spell it.
    var label: String { self == .immediate ? ".immediate" : ".standard" }
}

private func registerLockHolds(_ durability: TinyStorage.Durability) {
    let metrics = [lockHold, longLockHolds, heldCommits, heldUpdates, heldCompactions, preemptions, startingLoad]
    register(
        "g lock hold, \(durability.label): commits, updates and compactions in two processes",
        .init(
            metrics: metrics,
            // NB: whole numbers: left to itself, the tool prints figures over 10,000 in thousands.
            units: Dictionary(uniqueKeysWithValues: metrics.map { ($0, .count) }),
            warmupIterations: 0, scalingFactor: .one, maxDuration: .seconds(120), maxIterations: 1),
        setUp: { try LockHoldRun(durability) }, tearDown: { $0.stop() }
    ) { benchmark, run in
        benchmark.measurement(startingLoad, loadAverageNow())
        let outcome = try run.measure()
        for hold in outcome.holds { benchmark.measurement(lockHold, Int(hold)) }
        benchmark.measurement(longLockHolds, outcome.holds.count { $0 > 1_000_000 })
        benchmark.measurement(heldCommits, outcome.counts.commits)
        benchmark.measurement(heldUpdates, outcome.counts.updates)
        benchmark.measurement(heldCompactions, outcome.counts.compactions)
        benchmark.measurement(preemptions, outcome.counts.preemptions)
    }
}

/// One run: a store filled with 1,000 profiles, the same ``LockHoldWorkload`` here and in the
/// other process (``ChildStore/Role/lockWorker(durability:)``) for ``duration``.
final class LockHoldRun {
    static let duration: TimeInterval = 3

    let directory = ScratchDirectory("lock-holds")
    let storage: TinyStorage
    let other: ChildStore

    init(_ durability: TinyStorage.Durability) throws {
        storage = .open(directory, durability: durability)
        // NB: so each compaction rewrites about 120 KB and the commits have a real index to update.
        storage.prefill(profiles: 1_000)
        other = try ChildStore(role: .lockWorker(durability: durability), directory: directory)
    }

    struct Outcome {
        var holds: [UInt64]
        var counts: LockHoldWorkload.Counts
    }

    func measure() throws -> Outcome {
        let workload = LockHoldWorkload(storage: storage, label: "here")
        TinyStorage._startRecordingLockHolds()
        other.send("start")
        workload.start()
        Thread.sleep(forTimeInterval: Self.duration)
        var counts = workload.stop()
        var holds = TinyStorage._stopRecordingLockHolds()
        other.send("stop")
        let report = try LockHoldReport(other)
        counts.add(report.counts)
        holds += report.holds
        let tally = storage.integer(forKey: LockHoldWorkload.tallyKey)
        if tally != counts.updates {
            print("note: the shared tally is \(tally) after \(counts.updates) updates in both processes")
        }
        if counts.failures > 0 { print("note: \(counts.failures) operations failed during the lock-hold run") }
        return Outcome(holds: holds, counts: counts)
    }

    func stop() {
        other.stop()
        directory.remove()
    }
}

/// Commits, updates and compactions on one store, each in a loop on a thread of its own with a
/// pause after each operation, until stopped. Both processes of a ``LockHoldRun`` run it.
///
/// NB: paced, not flat out: six busy threads on a 2-core machine would measure how often the
/// scheduler takes the CPU from a thread that holds the lock, not how long the engine keeps it.
final class LockHoldWorkload: @unchecked Sendable {
    // @unchecked: `running`, `active` and `counts` are only touched while holding `condition`.
    /// The key that both processes' `update` loops increment, so they contend for it.
    static let tallyKey = "lock-hold-tally"
    static let commitPause: useconds_t = 200
    static let updatePause: useconds_t = 500
    static let compactionPause: useconds_t = 20_000

    struct Counts {
        var commits = 0
        var updates = 0
        var compactions = 0
        var failures = 0
        var preemptions = 0

        mutating func add(_ other: Counts) {
            commits += other.commits
            updates += other.updates
            compactions += other.compactions
            failures += other.failures
            preemptions += other.preemptions
        }

        /// "<commits> <updates> <compactions> <failures> <preemptions>", as the other process
        /// reports them.
        var line: String { "\(commits) \(updates) \(compactions) \(failures) \(preemptions)" }

        init() {}

        init?(line: Substring) {
            let numbers = line.split(separator: " ").compactMap { Int($0) }
            guard numbers.count == 5 else { return nil }
            (commits, updates, compactions, failures, preemptions) =
                (numbers[0], numbers[1], numbers[2], numbers[3], numbers[4])
        }
    }

    private let storage: TinyStorage
    private let commitKey: String
    private let condition = NSCondition()
    private var running = false
    private var active = 0
    private var counts = Counts()
    private var preemptionsAtStart = 0

    /// - Parameter label: Tells this process's commit key from the other's.
    init(storage: TinyStorage, label: String) {
        self.storage = storage
        commitKey = "lock-hold-\(label)"
    }

    func start() {
        condition.lock()
        running = true
        active = 3
        condition.unlock()
        preemptionsAtStart = Self.involuntarySwitches
        loop(\.commits, pause: Self.commitPause) { [storage, commitKey] number in
            try storage.storeOrThrow(number, forKey: commitKey)
        }
        loop(\.updates, pause: Self.updatePause) { [storage] _ in
            try storage.update(Self.tallyKey, as: Int.self) { $0 = ($0 ?? 0) + 1 }
        }
        loop(\.compactions, pause: Self.compactionPause) { [storage] _ in try storage._compactNow() }
    }

    /// Stops the loops, waits until each has finished its operation, and returns what they did.
    func stop() -> Counts {
        condition.lock()
        defer { condition.unlock() }
        running = false
        while active > 0 { condition.wait() }
        counts.preemptions = Self.involuntarySwitches - preemptionsAtStart
        return counts
    }

    /// Runs `operation` (given 1, 2, 3…) on a thread of its own until stopped, counting each
    /// success in `counter`.
    private func loop(
        _ counter: WritableKeyPath<Counts, Int> & Sendable, pause: useconds_t,
        _ operation: @escaping @Sendable (Int) throws -> Void
    ) {
        let thread = Thread { [self] in
            var number = 0
            while isRunning {
                number += 1
                do {
                    try operation(number)
                    count(counter)
                } catch {
                    count(\.failures)
                }
                usleep(pause)
            }
            condition.lock()
            active -= 1
            condition.broadcast()
            condition.unlock()
        }
        thread.start()
    }

    private var isRunning: Bool {
        condition.lock()
        defer { condition.unlock() }
        return running
    }

    private func count(_ counter: WritableKeyPath<Counts, Int>) {
        condition.lock()
        counts[keyPath: counter] += 1
        condition.unlock()
    }

    /// This process's involuntary context switches so far, all threads (`getrusage(2)`).
    static var involuntarySwitches: Int {
        var usage = rusage()
        #if canImport(Glibc)
        getrusage(RUSAGE_SELF.rawValue, &usage)
        #else
        getrusage(RUSAGE_SELF, &usage)
        #endif
        return Int(usage.ru_nivcsw)
    }
}

/// What the other process of a ``LockHoldRun`` reports after "stop": a line
/// "done <counts>" (``LockHoldWorkload/Counts/line``), then "holds" and every hold in nanoseconds.
struct LockHoldReport {
    var counts: LockHoldWorkload.Counts
    var holds: [UInt64]

    init(_ other: ChildStore) throws {
        let done = ChildStore.readLine(other.outputDescriptor) ?? ""
        let holdsLine = ChildStore.readLine(other.outputDescriptor) ?? ""
        guard done.hasPrefix("done "), let counts = LockHoldWorkload.Counts(line: done.dropFirst(5)),
            holdsLine.hasPrefix("holds")
        else {
            throw ChildStore.ChildFailed(message: "the other process reported '\(done)' after its lock-hold run")
        }
        self.counts = counts
        holds = holdsLine.split(separator: " ").dropFirst().compactMap { UInt64($0) }
    }
}

/// The lock-worker role (``ChildStore/Role/lockWorker(durability:)``): "start" on standard input
/// starts recording lock holds and the ``LockHoldWorkload``; "stop" stops both and reports them
/// (``LockHoldReport``). The end of standard input ends the process.
func runLockWorker(_ storage: TinyStorage) -> Never {
    let workload = LockHoldWorkload(storage: storage, label: "other")
    tellParent("ready")
    while let line = readLine() {
        switch line {
        case "start":
            TinyStorage._startRecordingLockHolds()
            workload.start()
        case "stop":
            let counts = workload.stop()
            let holds = TinyStorage._stopRecordingLockHolds()
            tellParent("done \(counts.line)")
            tellParent((["holds"] + holds.map { String($0) }).joined(separator: " "))
        default:
            break
        }
    }
    withExtendedLifetime(storage) { exit(0) }
}
