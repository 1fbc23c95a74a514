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
@Suite(.timeLimit(.minutes(10)))
struct SimulationTests {
    @Test(arguments: [Platform.linux, Platform.apple])
    func fixedSeeds(platform: Platform) {
        let report = SimulationExplorer.explore(seeds: (1...400).map { UInt64($0) }, platform: platform)
        report.recordIssues()
        #expect(report.runs == 400)
    }

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
        let deadline = Date(timeIntervalSinceNow: minutes * 60)
        var total = SimulationExplorer.Report()
        var batch = 0
        while count > 0 ? total.runs < count * 2 : Date() < deadline {
            let seeds = (0..<200).map { _ in UInt64.random(in: 1...UInt64.max) }
            for platform in [Platform.linux, Platform.apple] {
                total.merge(SimulationExplorer.explore(seeds: seeds, platform: platform))
            }
            batch += 1
            if total.failures.count >= 5 { break }
        }
        print("simulation: \(total.summary)")
        total.recordIssues()
    }
}
