import Benchmark

/// TinyStorage side by side with `UserDefaults` and SQLite (GRDB), plus raw baselines.
///
/// Names start with the workload's letter from the performance issue, so the table groups them:
/// (a) overwrite, (b) reads, (c) cold open, (d) inserts, (e) durable commit, (f) scaling,
/// (g) several processes (issues 3 and 10: notification latency, lock holds), and the floors of issue 12 (`floor: …`).
/// See `Benchmarks/README.md` for what each one does and the targets.
let benchmarks: @Sendable () -> Void = {
    // NB: the cross-process workloads start this executable again as the other process.
    runCrossProcessRoleIfRequested()
    registerOverwriteBenchmarks()
    registerCPUPerOverwriteBenchmarks()
    registerReadBenchmarks()
    registerTypedReadBenchmarks()
    registerTypedBesideStringBenchmarks()
    registerColdOpenBenchmarks()
    registerColdOpenInAFreshProcessBenchmarks()
    registerInsertBenchmarks()
    registerDurableCommitBenchmarks()
    registerScalingBenchmarks()
    registerCrossProcessBenchmarks()
    registerReaderGapBenchmarks()
    registerNotificationLatencyBenchmarks()
    registerLockHoldBenchmarks()
    registerFloorBenchmarks()
}
