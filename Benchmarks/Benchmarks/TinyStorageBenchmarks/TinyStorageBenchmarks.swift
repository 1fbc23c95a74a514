import Benchmark

/// TinyStorage side by side with `UserDefaults` and SQLite (GRDB), plus raw baselines.
///
/// Names start with the workload's letter from the performance issue, so the table groups them:
/// (a) overwrite, (b) reads, (c) cold open, (d) inserts, (e) durable commit, (f) scaling.
/// See `Benchmarks/README.md` for what each one does and the targets.
let benchmarks: @Sendable () -> Void = {
    registerOverwriteBenchmarks()
    registerReadBenchmarks()
    registerColdOpenBenchmarks()
    registerInsertBenchmarks()
    registerDurableCommitBenchmarks()
    registerScalingBenchmarks()
}
