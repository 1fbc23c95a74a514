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
/// turns within each iteration (10 of each, alternating which goes first), so that the ratio holds
/// while other processes' flushes make the disk 10 times slower from one second to the next. Each
/// sample is a mean over the iteration's 10.
private func registerDurableCommitBesideFlush() {
    let commit = BenchmarkMetric.custom("TinyStorage .immediate (ns)", useScalingFactor: false)
    let flush = BenchmarkMetric.custom("pwrite + fdatasync (ns)", useScalingFactor: false)
    let ratio = BenchmarkMetric.custom("commit / pwrite + fdatasync (%)", useScalingFactor: false)

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

        func timeCommit() -> UInt64 {
            next += 1
            let start = DispatchTime.now().uptimeNanoseconds
            storage.store(next, forKey: Keys.counter)
            return DispatchTime.now().uptimeNanoseconds - start
        }

        func timeFlush() -> UInt64 {
            let start = DispatchTime.now().uptimeNanoseconds
            file.append()
            file.sync()
            return DispatchTime.now().uptimeNanoseconds - start
        }
    }
    register(
        "e durable commit: TinyStorage .immediate beside pwrite + fdatasync",
        .init(
            metrics: [commit, flush, ratio], warmupIterations: 1, scalingFactor: .one, maxDuration: .seconds(5),
            maxIterations: 100),
        setUp: State.init, tearDown: { $0.directory.remove() }
    ) { benchmark, state in
        var (commits, flushes): (UInt64, UInt64) = (0, 0)
        for turn in 0..<10 {
            if turn.isMultiple(of: 2) {
                commits += state.timeCommit()
                flushes += state.timeFlush()
            } else {
                flushes += state.timeFlush()
                commits += state.timeCommit()
            }
        }
        benchmark.measurement(commit, Int(commits / 10))
        benchmark.measurement(flush, Int(flushes / 10))
        benchmark.measurement(ratio, Int(commits * 100 / max(flushes, 1)))
    }
}

/// Durable commits per second, from 4 threads × 500 `.immediate` commits and from 1 thread ×
/// 2,000, in each iteration. Commits that share one flush (group commit) show as a ratio above
/// 100%; one flush per commit, as about 100%.
///
/// NB: a flush here takes 0.1 to 10 ms depending on other processes' disk traffic, which changes
/// from one second to the next. So the two are interleaved, in 10 rounds of 4 × 50 and 1 × 200
/// (alternating which goes first), and slow moments slow both alike.
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

        /// Nanoseconds for `threads` threads, started together, each storing `commits` new values
        /// under a key of its own.
        func time(threads: Int, commits: Int) -> UInt64 {
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
            let began = DispatchTime.now().uptimeNanoseconds
            for _ in 0..<threads { start.signal() }
            done.wait()
            return DispatchTime.now().uptimeNanoseconds - began
        }
    }
    register(
        "e group commit: TinyStorage .immediate, 4 threads × 500 vs 1 thread × 2,000",
        .init(
            metrics: [oneThread, fourThreads, ratio], warmupIterations: 1, scalingFactor: .one,
            maxDuration: .seconds(20), maxIterations: 10),
        setUp: State.init, tearDown: { $0.directory.remove() }
    ) { benchmark, state in
        var (single, four): (UInt64, UInt64) = (0, 0)
        for round in 0..<10 {
            if round.isMultiple(of: 2) {
                single += state.time(threads: 1, commits: 200)
                four += state.time(threads: 4, commits: 50)
            } else {
                four += state.time(threads: 4, commits: 50)
                single += state.time(threads: 1, commits: 200)
            }
        }
        let perSecond = { (nanoseconds: UInt64) in Int(2_000 * 1_000_000_000 / max(nanoseconds, 1)) }
        benchmark.measurement(oneThread, perSecond(single))
        benchmark.measurement(fourThreads, perSecond(four))
        benchmark.measurement(ratio, Int(single * 100 / max(four, 1)))
    }
}
