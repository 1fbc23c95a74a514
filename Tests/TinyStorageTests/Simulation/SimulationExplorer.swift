import Foundation
import Testing

@testable import TinyStorage

/// Runs many seeds and, for each that fails, shrinks its plan to the shortest that still fails.
enum SimulationExplorer {
    struct Failure: @unchecked Sendable {
        // @unchecked: as `Report`.
        var plan: SimulationPlan
        var violations: [SimulationHistory.Violation]
        var trace: [String]
    }

    struct Report: @unchecked Sendable {
        // @unchecked: built on one thread and handed whole to another.
        var runs = 0
        var firstFailingSeed: UInt64?
        var choices = 0
        var faults = 0
        var failures: [Failure] = []

        mutating func merge(_ other: Report) {
            runs += other.runs
            choices += other.choices
            faults += other.faults
            failures += other.failures
        }

        var summary: String {
            "\(runs) schedules, \(choices) scheduling choices, \(faults) faults, \(failures.count) failing"
        }

        func recordIssues() {
            for failure in failures {
                Issue.record(
                    """
                    The simulation found \(failure.violations.map(\.description).joined(separator: "\n")).
                    Shortest plan that still fails (replay: TINYSTORAGE_SIMULATION_SEED=\(failure.plan.seed) swift test --filter SimulationTests/randomSeeds, which runs the unshrunk plan):
                    \(failure.plan)
                    Schedule:
                    \(failure.trace.suffix(400).joined(separator: "\n"))
                    """)
            }
        }
    }

    /// Whether each seed is printed before it runs (`TINYSTORAGE_SIMULATION_VERBOSE`): the seed
    /// a run that crashes the test process was on.
    private static let printsSeeds = ProcessInfo.processInfo.environment["TINYSTORAGE_SIMULATION_VERBOSE"] != nil

    /// Runs `body` on a thread of its own and returns what it returns: a simulation runs for a
    /// minute without an `await`, and on the test's own thread it held one of the few threads
    /// Swift Testing runs every test on (as many as cores), so tests with a time limit waited past it.
    static func onThreadOfItsOwn(_ body: @escaping @Sendable () -> Report) async -> Report {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: body()) }
            thread.stackSize = 4 << 20
            thread.start()
        }
    }

    static func explore(seeds: [UInt64], platform: Platform, faults: SimulationPlan.FaultKinds = .all) -> Report {
        var report = Report()
        for seed in seeds {
            let plan = SimulationPlan(seed: seed, platform: platform, faults: faults)
            if printsSeeds {
                print("simulation: seed \(seed), \(platform.commitLock == .fileLock ? "Apple" : "Linux")")
            }
            let run = SimulationRun(plan)
            let violations = run.run()
            report.runs += 1
            report.choices += run.scheduler.choices
            report.faults += plan.faults.count
            if !violations.isEmpty {
                if report.firstFailingSeed == nil { report.firstFailingSeed = seed }
                report.failures.append(shrink(plan))
                if report.failures.count >= 3 { break }
            }
        }
        return report
    }

    /// The plan with as many faults and operations taken away as can be while it still fails.
    static func shrink(_ original: SimulationPlan) -> Failure {
        var best = original
        var attempts = 0
        func fails(_ plan: SimulationPlan) -> Bool {
            attempts += 1
            return !SimulationRun(plan).run().isEmpty
        }
        var improved = true
        while improved, attempts < 300 {
            improved = false
            for index in best.faults.indices.reversed() where attempts < 300 {
                var candidate = best
                candidate.faults.remove(at: index)
                if fails(candidate) {
                    best = candidate
                    improved = true
                }
            }
            for slot in best.operations.indices {
                while !best.operations[slot].isEmpty, attempts < 300 {
                    var candidate = best
                    candidate.operations[slot].removeLast()
                    guard fails(candidate) else { break }
                    best = candidate
                    improved = true
                }
                for index in best.operations[slot].indices.reversed() where attempts < 300 {
                    guard index < best.operations[slot].count else { continue }
                    var candidate = best
                    candidate.operations[slot].remove(at: index)
                    if fails(candidate) {
                        best = candidate
                        improved = true
                    }
                }
            }
        }
        let run = SimulationRun(best, tracing: true)
        let violations = run.run()
        return Failure(plan: best, violations: violations, trace: run.trace)
    }
}
