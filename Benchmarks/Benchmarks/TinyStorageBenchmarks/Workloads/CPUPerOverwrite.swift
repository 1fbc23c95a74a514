import Benchmark
import Dispatch
import Foundation
@_spi(Benchmarks) import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// (a) Issue 32: battery is CPU time, not latency. An `Int` overwrite costs its caller some CPU
/// time and the store's own threads more: delivering its change (value streams, Observation,
/// `didChangeNotification`), flushing, compacting. Each iteration stores 10,000 new `Int`s under
/// one key of the store of `a overwrite Int`, opened with a notification queue of its own that
/// runs (the benchmark's main queue does not), waits until every change has been announced, and
/// reports the CPU time of the whole process per overwrite, the calling thread's (the floor: what
/// the call itself costs), and the first as a percentage of the second.
///
/// Target: at most 1.5 times MMKV single-process's 145 ns, all threads counted (218 ns).
func registerCPUPerOverwriteBenchmarks() {
    #if os(Linux)
    let allThreads = BenchmarkMetric.custom("CPU, all threads (ns)", useScalingFactor: false)
    let caller = BenchmarkMetric.custom("CPU, calling thread (ns)", useScalingFactor: false)
    let ratio = BenchmarkMetric.custom("all threads / calling thread (%)", useScalingFactor: false)
    register(
        "a overwrite Int: CPU time of all threads beside the calling thread's",
        .init(
            metrics: [allThreads, caller, ratio], warmupIterations: 2, scalingFactor: .one,
            maxDuration: .seconds(10), maxIterations: 100),
        setUp: { CPUOverwriteState() }, tearDown: { $0.directory.remove() }
    ) { benchmark, state in
        let operations = 10_000
        let (process, thread) = state.overwrite(operations)
        benchmark.measurement(allThreads, process / operations)
        benchmark.measurement(caller, thread / operations)
        benchmark.measurement(ratio, process * 100 / max(thread, 1))
    }
    #endif
}

#if os(Linux)
/// A store pre-filled with 1,000 profiles, announcing on a queue that runs.
final class CPUOverwriteState {
    let directory = ScratchDirectory("cpu-overwrite")
    let storage: TinyStorage
    private var next = 0

    init() {
        storage = TinyStorage(
            insideDirectory: directory.url, name: "store", notificationQueue: DispatchQueue(label: "cpu-overwrite"))
        storage.prefill(profiles: 1_000)
        storage.store(0, forKey: Keys.counter)
        storage._waitUntilDelivered()
    }

    /// Stores `count` new `Int`s and waits until they are announced; returns the CPU time the
    /// process and the calling thread spent meanwhile, in nanoseconds.
    func overwrite(_ count: Int) -> (process: Int, thread: Int) {
        let process = Self.cpuTime(CLOCK_PROCESS_CPUTIME_ID)
        let thread = Self.cpuTime(CLOCK_THREAD_CPUTIME_ID)
        for _ in 0..<count {
            next += 1
            storage.store(next, forKey: Keys.counter)
        }
        let threadSpent = Self.cpuTime(CLOCK_THREAD_CPUTIME_ID) - thread
        storage._waitUntilDelivered()
        return (Self.cpuTime(CLOCK_PROCESS_CPUTIME_ID) - process, threadSpent)
    }

    /// The CPU time `clock` has counted (`clock_gettime(2)`), in nanoseconds.
    private static func cpuTime(_ clock: clockid_t) -> Int {
        var time = timespec()
        clock_gettime(clock, &time)
        return Int(time.tv_sec) * 1_000_000_000 + Int(time.tv_nsec)
    }
}
#endif
