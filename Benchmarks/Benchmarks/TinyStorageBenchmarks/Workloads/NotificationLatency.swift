import Benchmark
import Dispatch
import Foundation
import TinyStorage

/// (g) Issue 10's figures: from a commit in this process to `didChangeNotification` in another
/// process (``ChildStore/Role/listener``), over 10,000 commits, and how many commits were never
/// announced: plain; while the log passes its 1 MiB compaction threshold again and again; and
/// while a third process keeps replacing the data file.
func registerNotificationLatencyBenchmarks() {
    registerNotificationLatency(.plain)
    registerNotificationLatency(.compacting)
    registerNotificationLatency(.replaced)
}

/// From just before the `store` call here to the start of the observer there, in microseconds:
/// one sample per commit that was announced.
let notificationLatency = BenchmarkMetric.custom("notification latency (µs)", useScalingFactor: false)
/// Commits whose notification had not arrived 2 s after the last commit (one sample per run).
let missedNotifications = BenchmarkMetric.custom("missed notifications (of 10,000)", useScalingFactor: false)
/// Notifications of the measured key that came without a writeID, so no commit can be matched to
/// them (one sample per run). Their commits count as missed.
let unstampedNotifications = BenchmarkMetric.custom("announced without writeID (times)", useScalingFactor: false)
/// Notifications that carried the writeID of a commit announced before (one sample per run): each
/// commit should be announced once.
let repeatedNotifications = BenchmarkMetric.custom("announced again (times)", useScalingFactor: false)
/// How often the data file was replaced during the run (compactions, here or in the third process).
let fileReplacements = BenchmarkMetric.custom("data file replaced (times)", useScalingFactor: false)
/// The system's load average over the last minute when the measurement started, times 100 (one
/// sample per run): on a shared 2-core machine, how much else wanted the CPUs.
let startingLoad = BenchmarkMetric.custom("load average at the start (×100)", useScalingFactor: false)

/// The 1-minute load average now, times 100 (`getloadavg(3)`); -1 when the system does not say.
func loadAverageNow() -> Int {
    var averages = [0.0, 0.0, 0.0]
    return getloadavg(&averages, 3) > 0 ? Int((averages[0] * 100).rounded()) : -1
}

enum NotificationVariant {
    /// Small commits (an Int), nothing else happening.
    case plain
    /// Commits of about 1 KiB, so the log passes its 1 MiB compaction threshold about every 1,000
    /// commits and this process compacts it, replacing the data file (about 10 times a run).
    case compacting
    /// Small commits, while a third process compacts the store after every 100th (see
    /// ``ChildStore/Role/compactor``).
    case replaced

    var name: String {
        switch self {
        case .plain: "plain"
        case .compacting: "compactions during the run"
        case .replaced: "data file replaced by another process"
        }
    }
}

private func registerNotificationLatency(_ variant: NotificationVariant) {
    register(
        "g notification latency, 10,000 commits: \(variant.name)",
        .init(
            metrics: [
                .wallClock, notificationLatency, missedNotifications, unstampedNotifications, repeatedNotifications,
                fileReplacements, startingLoad,
            ],
            warmupIterations: 0, scalingFactor: .one, maxDuration: .seconds(600), maxIterations: 1),
        setUp: { try NotificationRun(variant) }, tearDown: { $0.stop() }
    ) { benchmark, run in
        benchmark.measurement(startingLoad, loadAverageNow())
        let outcome = run.commitAll()
        for latency in outcome.latencies { benchmark.measurement(notificationLatency, latency / 1_000) }
        benchmark.measurement(missedNotifications, outcome.missed)
        benchmark.measurement(unstampedNotifications, outcome.unstamped)
        benchmark.measurement(repeatedNotifications, outcome.repeated)
        benchmark.measurement(fileReplacements, outcome.replacements)
    }
}

/// One run: the store here, the listener process, and for ``NotificationVariant/replaced`` the
/// compacting process.
final class NotificationRun {
    static let commits = 10_000
    /// How long to wait for one commit's notification before committing the next anyway. Normally
    /// one commit is in flight at a time; a slow or lost notification does not stall the run.
    static let patience: DispatchTimeInterval = .milliseconds(20)
    /// After this many commits in a row went unanswered, stop waiting until an answer comes again,
    /// so a listener that has gone deaf costs seconds, not 10,000 × ``patience``.
    static let deafAfter = 100
    /// Issue 10's rule: a notification that has not come 2 s after the last commit is missed.
    static let grace: DispatchTimeInterval = .seconds(2)

    let variant: NotificationVariant
    let directory = ScratchDirectory("notification-latency")
    let storage: TinyStorage
    let listener: ChildStore
    let compactor: ChildStore?
    let answers: AnswerBook
    private let padding = String(repeating: "x", count: 1_000)

    init(_ variant: NotificationVariant) throws {
        self.variant = variant
        storage = .open(directory)
        storage.store(Self.value(0, variant: variant, padding: padding), forKey: "stamp")
        listener = try ChildStore(role: .listener, directory: directory)
        if listener.greeting.hasSuffix("blocked") {
            print("note: the listener's main queue does not run; notifications posted there are missed")
        }
        compactor = variant == .replaced ? try ChildStore(role: .compactor, directory: directory) : nil
        answers = AnswerBook(count: Self.commits, from: listener.outputDescriptor)
    }

    /// The value of commit `number`: always different from the last, so every commit is announced.
    static func value(_ number: Int, variant: NotificationVariant, padding: String) -> any Encodable {
        variant == .compacting ? "\(number) \(padding)" : number
    }

    struct Outcome {
        var latencies: [Int]
        var missed: Int
        var unstamped: Int
        var repeated: Int
        var replacements: Int
    }

    func commitAll() -> Outcome {
        var file = fileIdentity
        var replacements = 0
        var unanswered = 0
        var answeredWhenDeaf = 0
        for number in 0..<Self.commits {
            let stamp = CommitStamp(number: number, nanoseconds: DispatchTime.now().uptimeNanoseconds)
            storage.store(
                Self.value(number + 1, variant: variant, padding: padding), forKey: "stamp",
                writeID: .init(commitStamp: stamp))
            if variant == .replaced, number % 100 == 99 { compactor?.send("compact") }
            if unanswered < Self.deafAfter {
                unanswered = answers.wait(for: number, until: .now() + Self.patience) ? 0 : unanswered + 1
                if unanswered == Self.deafAfter { answeredWhenDeaf = answers.answeredCount }
            } else if answers.answeredCount > answeredWhenDeaf {
                unanswered = 0  // it hears again: wait for each commit again
            }
            let now = fileIdentity
            if now != file { (file, replacements) = (now, replacements + 1) }
        }
        answers.waitForAll(until: .now() + Self.grace)
        let latencies = answers.latencies
        return Outcome(
            latencies: latencies, missed: Self.commits - latencies.count, unstamped: answers.unstamped,
            repeated: answers.repeated,
            replacements: replacements)
    }

    /// The data file's inode number. A replacement (compaction renames a new file over the old one)
    /// changes it: the new file is created while the old one still exists.
    private var fileIdentity: UInt64 {
        var status = stat()
        return stat(storage.fileURL.path, &status) == 0 ? UInt64(status.st_ino) : 0
    }

    func stop() {
        compactor?.stop()
        listener.stop()
        answers.join()
        directory.remove()
    }
}

/// The listener's answers, "<commit number> <latency in ns>" per line, read on a thread of their own.
final class AnswerBook: @unchecked Sendable {
    // @unchecked: the counts and `latency` are only touched while holding `condition`.
    private let condition = NSCondition()
    private var latency: [Int]
    private var answered = 0
    private var unstampedCount = 0
    private var repeatedCount = 0
    private let finished = DispatchSemaphore(value: 0)

    init(count: Int, from fd: Int32) {
        latency = Array(repeating: -1, count: count)
        Thread.detachNewThread { [self] in
            while let line = ChildStore.readLine(fd) {
                if line == "unstamped" {
                    countUnstamped()
                    continue
                }
                let parts = line.split(separator: " ")
                guard parts.count == 2, let number = Int(parts[0]), let nanoseconds = Int(parts[1]) else { continue }
                record(number, nanoseconds)
            }
            finished.signal()
        }
    }

    private func record(_ number: Int, _ nanoseconds: Int) {
        condition.lock()
        defer { condition.unlock() }
        guard latency.indices.contains(number) else { return }
        // NB: the first announcement is the sample; a later one is counted, not measured.
        guard latency[number] < 0 else {
            repeatedCount += 1
            return
        }
        latency[number] = nanoseconds
        answered += 1
        condition.broadcast()
    }

    private func countUnstamped() {
        condition.lock()
        defer { condition.unlock() }
        unstampedCount += 1
    }

    /// How many notifications of the measured key came without a writeID.
    var unstamped: Int {
        condition.lock()
        defer { condition.unlock() }
        return unstampedCount
    }

    /// How many notifications announced a commit that had been announced already.
    var repeated: Int {
        condition.lock()
        defer { condition.unlock() }
        return repeatedCount
    }

    /// How many commits were announced so far.
    var answeredCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return answered
    }

    /// Waits until commit `number` was announced, or `deadline`; whether it was.
    func wait(for number: Int, until deadline: DispatchTime) -> Bool {
        wait(until: deadline) { $0.latency[number] >= 0 }
    }

    func waitForAll(until deadline: DispatchTime) {
        _ = wait(until: deadline) { $0.answered == $0.latency.count }
    }

    private func wait(until deadline: DispatchTime, _ done: (AnswerBook) -> Bool) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !done(self) {
            let now = DispatchTime.now()
            guard now < deadline else { return false }
            let seconds = Double(deadline.uptimeNanoseconds - now.uptimeNanoseconds) / 1e9
            _ = condition.wait(until: Date(timeIntervalSinceNow: seconds))
        }
        return true
    }

    /// Every latency received, in nanoseconds.
    var latencies: [Int] {
        condition.lock()
        defer { condition.unlock() }
        return latency.filter { $0 >= 0 }
    }

    /// Waits for the reading thread to end (the listener closed its output).
    func join() { finished.wait() }
}
