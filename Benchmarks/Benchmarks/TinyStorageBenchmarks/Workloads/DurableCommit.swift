import Benchmark
import Foundation
import TinyStorage

/// (e) One power-loss-durable commit of one small value, against the raw cost of the disk flush;
/// and durable commits from several threads at once (group commit, issue 11).
func registerDurableCommitBenchmarks() {
    // Disk flushes take milliseconds on some machines: a few hundred samples are plenty.
    let durable = Benchmark.Configuration.perIteration(seconds: 3, iterations: 500)

    registerTinyStorageOverwrite(
        "e durable commit: TinyStorage .immediate", prefill: 1_000, durability: .immediate,
        configuration: durable)
    registerSQLiteOverwrite(
        "e durable commit: SQLite synchronous=FULL", label: "durable", synchronous: .full, configuration: durable)

    final class DefaultsState {
        let suite = UserDefaultsSuite("durable")
        var next = 0
        init() {
            for index in 0..<1_000 { suite.defaults.set(JSON.encode(Profile.sample(index)), forKey: Keys.key(index)) }
            suite.defaults.synchronize()
        }
    }
    register(
        "e durable commit: UserDefaults set+synchronize", durable, setUp: DefaultsState.init,
        tearDown: { $0.suite.destroy() }
    ) { _, state in
        state.next += 1
        state.suite.defaults.set(state.next, forKey: Keys.counter)
        state.suite.defaults.synchronize()
    }

    final class RawState {
        let directory = ScratchDirectory("raw")
        let file: RawAppendFile
        init(space: RawAppendFile.Space) throws {
            file = try RawAppendFile(path: directory.path("append.log"), space: space)
        }
    }
    register(
        "e durable commit: append + fdatasync (baseline)", durable, setUp: { try RawState(space: .growing) },
        tearDown: { $0.directory.remove() }
    ) { _, state in
        state.file.append()
        state.file.sync()
    }
    register(
        "e durable commit: preallocated pwrite + fdatasync (baseline)", durable,
        setUp: { try RawState(space: .zeroFilled(bytes: 1 << 20)) }, tearDown: { $0.directory.remove() }
    ) { _, state in
        state.file.append()
        state.file.sync()
    }

    registerDurableCommitBesideFlush()
    registerGroupCommit()
}

/// The `.immediate` commit and the raw preallocated `pwrite` + `fdatasync` it rests on, taken in
/// turns (``timeInTurns(rounds:_:_:)``), 10 of each per iteration: other processes' flushes make
/// this disk 10 times slower from one second to the next, and the ratio holds through that.
private func registerDurableCommitBesideFlush() {
    let paired = PairedMetrics("TinyStorage .immediate", beside: "pwrite + fdatasync")
    final class State {
        let directory = ScratchDirectory("durable-beside")
        let storage: TinyStorage
        let file: RawAppendFile
        var next = 0
        init() throws {
            storage = .open(directory, durability: .immediate)
            storage.prefill(profiles: 1_000)
            file = try RawAppendFile(path: directory.path("raw.log"), space: .zeroFilled(bytes: 1 << 20))
        }
    }
    register(
        "e durable commit: TinyStorage .immediate beside pwrite + fdatasync",
        .init(
            metrics: paired.all, warmupIterations: 1, scalingFactor: .one, maxDuration: .seconds(5),
            maxIterations: 100),
        setUp: State.init, tearDown: { $0.directory.remove() }
    ) { benchmark, state in
        let totals = timeInTurns(
            rounds: 10,
            {
                state.next += 1
                state.storage.store(state.next, forKey: Keys.counter)
            },
            {
                state.file.append()
                state.file.sync()
            })
        paired.record(totals, operations: 10, in: benchmark)
    }
}

/// Durable commits per second, from 4 threads × 500 `.immediate` commits and from 1 thread ×
/// 2,000, in each iteration. Commits that share one flush (group commit) show as a ratio above
/// 100%; one flush per commit, as about 100%.
///
/// NB: a flush here takes 0.1 to 10 ms depending on other processes' disk traffic, which changes
/// from one second to the next. So the two are taken in turns (``timeInTurns(rounds:_:_:)``), in
/// 10 rounds of 1 × 200 and 4 × 50, and slow moments slow both alike.
private func registerGroupCommit() {
    let oneThread = BenchmarkMetric.custom("1 thread × 2,000 (commits/s)", useScalingFactor: false)
    let fourThreads = BenchmarkMetric.custom("4 threads × 500 (commits/s)", useScalingFactor: false)
    let ratio = BenchmarkMetric.custom("4 threads / 1 thread (%)", useScalingFactor: false)

    final class State: @unchecked Sendable {
        // @unchecked: the store is Sendable; the directory is only touched in init and teardown.
        let directory = ScratchDirectory("group-commit")
        let storage: TinyStorage
        init() {
            storage = .open(directory, durability: .immediate)
            storage.prefill(profiles: 1_000)
        }

        /// Runs `threads` threads, started together, each storing `commits` new values under a
        /// key of its own, and returns when all are done.
        func run(threads: Int, commits: Int) {
            let start = DispatchSemaphore(value: 0)
            let done = DispatchGroup()
            for thread in 0..<threads {
                done.enter()
                Thread.detachNewThread { [storage] in
                    start.wait()
                    let key = "thread-\(thread)"
                    let first = storage.integer(forKey: key)
                    for value in 1...commits { storage.store(first + value, forKey: key) }
                    done.leave()
                }
            }
            for _ in 0..<threads { start.signal() }
            done.wait()
        }
    }
    register(
        "e group commit: TinyStorage .immediate, 4 threads × 500 vs 1 thread × 2,000",
        .init(
            metrics: [oneThread, fourThreads, ratio], warmupIterations: 1, scalingFactor: .one,
            maxDuration: .seconds(20), maxIterations: 10),
        setUp: State.init, tearDown: { $0.directory.remove() }
    ) { benchmark, state in
        let (single, four) = timeInTurns(
            rounds: 10, { state.run(threads: 1, commits: 200) }, { state.run(threads: 4, commits: 50) })
        let perSecond = { (nanoseconds: UInt64) in Int(2_000 * 1_000_000_000 / max(nanoseconds, 1)) }
        benchmark.measurement(oneThread, perSecond(single))
        benchmark.measurement(fourThreads, perSecond(four))
        benchmark.measurement(ratio, Int(single * 100 / max(four, 1)))
    }
}
