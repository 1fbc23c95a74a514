import Foundation
import Testing

@testable import TinyStorage

/// Deterministic simulation (issue 29): several processes sharing one store on a simulated disk,
/// one thread at a time in an order a seeded scheduler chooses at every file-system call and every
/// wait, with faults at chosen points, checked against the model of ``SimulationHistory``.
///
/// `swift test --filter Simulation` runs the fixed seeds CI runs. To explore more:
/// `TINYSTORAGE_SIMULATION_SEEDS=100000 swift test --filter SimulationTests/randomSeeds` runs that
/// many random seeds of each semantics (`TINYSTORAGE_SIMULATION_MINUTES=30` runs for that long
/// instead); `TINYSTORAGE_SIMULATION_SEED=<seed>` replays one, printing its schedule.
/// `TINYSTORAGE_SIMULATION_FAULTS=restores,cacheLosses` draws only those faults (names as in
/// ``SimulationPlan/FaultKinds/named``; `none` for none) and `TINYSTORAGE_SIMULATION_FROM=1` takes
/// the seeds in order from 1: the run stops at the first failure and says how many seeds it took.
@Suite struct SimulationTests {
    static let fixedSeedCount = 300

    @Test(.timeLimit(.minutes(10)), arguments: [Platform.linux, Platform.apple])
    func fixedSeeds(platform: Platform) async {
        let report = await SimulationExplorer.onThreadOfItsOwn {
            SimulationExplorer.explore(seeds: (1...Self.fixedSeedCount).map { UInt64($0) }, platform: platform)
        }
        report.recordIssues()
        #expect(report.runs == Self.fixedSeedCount)
    }

    /// NB: no time limit: it runs as long as `TINYSTORAGE_SIMULATION_MINUTES` asks (a suite-wide
    /// limit of ten minutes failed every longer run). A schedule that deadlocks is reported by the
    /// scheduler; one that livelocks runs until stopped, so give long runs a `timeout` of your own.
    @Test
    func randomSeeds() throws {
        let environment = ProcessInfo.processInfo.environment
        if let text = environment["TINYSTORAGE_SIMULATION_SEED"], let seed = UInt64(text) {
            for platform in [Platform.linux, Platform.apple] {
                let run = SimulationRun(SimulationPlan(seed: seed, platform: platform), tracing: true)
                let violations = run.run()
                print("\(run.plan)\n" + run.trace.joined(separator: "\n"))
                for violation in violations { Issue.record("\(violation)") }
            }
            return
        }
        let count = environment["TINYSTORAGE_SIMULATION_SEEDS"].flatMap { Int($0) } ?? 0
        let minutes = environment["TINYSTORAGE_SIMULATION_MINUTES"].flatMap { Double($0) } ?? 0
        guard count > 0 || minutes > 0 else { return }
        let kinds = try environment["TINYSTORAGE_SIMULATION_FAULTS"].map(SimulationPlan.FaultKinds.init(names:)) ?? .all
        var next = environment["TINYSTORAGE_SIMULATION_FROM"].flatMap { UInt64($0) }
        let deadline = Date(timeIntervalSinceNow: minutes * 60)
        var total = SimulationExplorer.Report()
        while count > 0 ? total.runs < count * 2 : Date() < deadline {
            let seeds = (0..<100).map { _ in
                guard let seed = next else { return UInt64.random(in: 1...UInt64.max) }
                next = seed + 1
                return seed
            }
            for platform in [Platform.linux, Platform.apple] {
                let report = SimulationExplorer.explore(seeds: seeds, platform: platform, faults: kinds)
                if let first = report.firstFailingSeed {
                    print(
                        "simulation: \(platform.commitLock == .fileLock ? "Apple" : "Linux") semantics failed first at seed \(first), after \(total.runs + report.runs) schedules"
                    )
                }
                total.merge(report)
            }
            if total.failures.count >= 4 || (next != nil && !total.failures.isEmpty) { break }
        }
        print("simulation: \(total.summary)")
        total.recordIssues()
    }
}
