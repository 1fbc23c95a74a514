import Foundation
import Testing

@testable import TinyStorage

/// Model-based crash runs (issue 11): random operations on a store on a simulated disk, crashed
/// at random calls inside commits, flushes, compactions and repairs, and between operations;
/// after every crash the store is reopened on what the power loss left and checked against the
/// commit order (see ``CrashTrial``).
///
/// Each run prints its seeds. `TINYSTORAGE_CRASH_SEED=<seed>` replays one trial;
/// `TINYSTORAGE_CRASH_SOAK=<trials>` runs that many trials per mode instead of the default.
@Suite struct CrashModelTests {
    static let defaultTrials = 1_000

    @Test(arguments: [TinyStorage.Durability.standard, .immediate])
    func randomOperationsKeepTheContractThroughRandomCrashes(durability: TinyStorage.Durability) {
        let report = Self.runTrials(durability: durability)
        report.recordIssues()
        #expect(report.crashPoints >= report.trials, "every trial crashed at least once")
    }

    /// Runs the trials for `durability` (or the one `TINYSTORAGE_CRASH_SEED` names) and prints
    /// the summary.
    static func runTrials(durability: TinyStorage.Durability) -> CrashRunReport {
        let environment = ProcessInfo.processInfo.environment
        let seeds: [UInt64]
        let title: String
        if let text = environment["TINYSTORAGE_CRASH_SEED"], let seed = UInt64(text) {
            seeds = [seed]
            title = "crash run (\(durability)), seed \(seed)"
        } else {
            let trials = environment["TINYSTORAGE_CRASH_SOAK"].flatMap { Int($0) } ?? defaultTrials
            let base = UInt64.random(in: 0...UInt64.max)
            var generator = SeededGenerator(seed: base)
            seeds = (0..<trials).map { _ in generator.next() }
            title = "crash run (\(durability)), base seed \(base)"
        }
        let start = ContinuousClock.now
        var report = CrashRunReport()
        for seed in seeds {
            var trial = CrashTrial(seed: seed, durability: durability, isTracing: seeds.count == 1)
            trial.run()
            if seeds.count == 1 { print(trial.trace.joined(separator: "\n")) }
            report.merge(trial.report)
        }
        let elapsed = ContinuousClock.now - start
        print(report.summary(title: title) + "\n  took \(elapsed); replay a trial with TINYSTORAGE_CRASH_SEED=<seed>")
        return report
    }
}
