import Benchmark
import Foundation
import TinyStorage

/// (e) One power-loss-durable commit of one small value, against the raw cost of the disk flush;
/// and the raw cost of the `pwrite(2)` that every non-durable commit pays at least.
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
        let limit: Int
        init(preallocate: Int) throws {
            file = try RawAppendFile(path: directory.path("append.log"), preallocate: preallocate)
            limit = preallocate > 0 ? preallocate : .max
        }
    }
    register(
        "e durable commit: append + fdatasync (baseline)", durable, setUp: { try RawState(preallocate: 0) },
        tearDown: { $0.directory.remove() }
    ) { _, state in
        state.file.append()
        state.file.sync()
    }
    register(
        "e durable commit: preallocated pwrite + fdatasync (baseline)", durable,
        setUp: { try RawState(preallocate: 1 << 20) }, tearDown: { $0.directory.remove() }
    ) { _, state in
        state.file.append(limit: state.limit)
        state.file.sync()
    }

    register(
        "raw append: pwrite 30 B (baseline)", .perOperation(), setUp: { try RawState(preallocate: 0) },
        tearDown: { $0.directory.remove() }
    ) { benchmark, state in
        for _ in benchmark.scaledIterations { state.file.append() }
    }
}
