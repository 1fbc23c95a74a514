import Benchmark
import Dispatch

/// Times two workloads in turns, `rounds` times each, alternating which goes first, so that load
/// from other work on the machine (a busy CPU, a disk made slow by other processes' flushes) hits
/// both alike. Returns each one's total in nanoseconds.
///
/// Issue 12's targets are ratios; two benchmarks run seconds apart on a shared machine drift
/// apart by more than the margins those targets leave, while two taken in turns do not.
func timeInTurns(rounds: Int, _ first: () -> Void, _ second: () -> Void) -> (first: UInt64, second: UInt64) {
    var totals: (first: UInt64, second: UInt64) = (0, 0)
    for round in 0..<rounds {
        for firstNow in round.isMultiple(of: 2) ? [true, false] : [false, true] {
            let start = DispatchTime.now().uptimeNanoseconds
            if firstNow { first() } else { second() }
            let elapsed = DispatchTime.now().uptimeNanoseconds - start
            if firstNow { totals.first += elapsed } else { totals.second += elapsed }
        }
    }
    return totals
}

/// The three metrics of a workload timed beside its floor: each in nanoseconds per operation, and
/// the first as a percentage of the second.
struct PairedMetrics {
    let workload: BenchmarkMetric
    let floor: BenchmarkMetric
    let ratio: BenchmarkMetric

    init(_ workload: String, beside floor: String) {
        self.workload = .custom("\(workload) (ns)", useScalingFactor: false)
        self.floor = .custom("\(floor) (ns)", useScalingFactor: false)
        ratio = .custom("\(workload) / \(floor) (%)", useScalingFactor: false)
    }

    var all: [BenchmarkMetric] { [workload, floor, ratio] }

    /// How a pair of fast operations timed in turns runs: 10 warm-up iterations, then up to 2,000
    /// iterations or 3 seconds.
    var inTurns: Benchmark.Configuration {
        .init(
            metrics: all, warmupIterations: 10, scalingFactor: .one, maxDuration: .seconds(3), maxIterations: 2_000)
    }

    /// Records one iteration: `totals` nanoseconds over `operations` operations of each.
    func record(_ totals: (first: UInt64, second: UInt64), operations: UInt64, in benchmark: Benchmark) {
        benchmark.measurement(workload, Int(totals.first / operations))
        benchmark.measurement(floor, Int(totals.second / operations))
        benchmark.measurement(ratio, Int(totals.first * 100 / max(totals.second, 1)))
    }
}
