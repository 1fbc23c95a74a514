import Benchmark
import Foundation
import TinyStorage

/// (a) Overwrite one Int key, 1,000 times per iteration, in a store pre-filled with 1,000 profiles.
/// Every value differs from the last, so every call is a real commit.
func registerOverwriteBenchmarks() {
    registerTinyStorageOverwrite("a overwrite Int: TinyStorage", prefill: 1_000)

    final class Defaults {
        let suite = UserDefaultsSuite("overwrite")
        var next = 0
    }
    func prefilledDefaults() -> Defaults {
        let state = Defaults()
        for index in 0..<1_000 { state.suite.defaults.set(JSON.encode(Profile.sample(index)), forKey: Keys.key(index)) }
        state.suite.defaults.set(0, forKey: Keys.counter)
        state.suite.defaults.synchronize()
        return state
    }
    // NB: on Linux `set` only updates memory: nothing reaches the disk until `synchronize()`.
    register(
        "a overwrite Int: UserDefaults.set", .perOperation(), setUp: prefilledDefaults,
        tearDown: { $0.suite.destroy() }
    ) { benchmark, state in
        for _ in benchmark.scaledIterations {
            state.next += 1
            state.suite.defaults.set(state.next, forKey: Keys.counter)
        }
    }
    register(
        "a overwrite Int: UserDefaults.set+synchronize", .perIteration(seconds: 2, iterations: 2_000),
        setUp: prefilledDefaults, tearDown: { $0.suite.destroy() }
    ) { _, state in
        state.next += 1
        state.suite.defaults.set(state.next, forKey: Keys.counter)
        state.suite.defaults.synchronize()
    }

    registerSQLiteOverwrite(
        "a overwrite Int: SQLite", label: "overwrite", synchronous: .normal, configuration: .perOperation())
}

/// One `store(_:forKey:)` of a new Int per operation, into a store pre-filled with `prefill` profiles.
func registerTinyStorageOverwrite(
    _ name: String, prefill: Int, durability: TinyStorage.Durability = .standard,
    configuration: Benchmark.Configuration = .perOperation()
) {
    final class State {
        let directory: ScratchDirectory
        let storage: TinyStorage
        var next = 0
        init(label: String, prefill: Int, durability: TinyStorage.Durability) {
            directory = ScratchDirectory(label)
            storage = .open(directory, durability: durability)
            storage.prefill(profiles: prefill)
            storage.store(0, forKey: Keys.counter)
        }
    }
    register(
        name, configuration,
        setUp: { State(label: "overwrite-\(prefill)", prefill: prefill, durability: durability) },
        tearDown: { $0.directory.remove() }
    ) { benchmark, state in
        for _ in benchmark.scaledIterations {
            state.next += 1
            state.storage.store(state.next, forKey: Keys.counter)
        }
    }
}

/// One upsert of a new JSON-encoded Int per operation, into a table pre-filled with 1,000 profiles.
func registerSQLiteOverwrite(
    _ name: String, label: String, synchronous: SQLiteKV.Synchronous, configuration: Benchmark.Configuration
) {
    final class State {
        let directory: ScratchDirectory
        let kv: SQLiteKV
        let encoder = JSON.encoder
        var next = 0
        init(label: String, synchronous: SQLiteKV.Synchronous) throws {
            directory = ScratchDirectory(label)
            kv = try SQLiteKV(path: directory.path("kv.sqlite"), synchronous: synchronous)
            try kv.prefill(SQLiteKV.profiles(1_000) + [(Keys.counter, JSON.encode(0))])
        }
    }
    register(
        name, configuration, setUp: { try State(label: label, synchronous: synchronous) },
        tearDown: { $0.directory.remove() }
    ) { benchmark, state in
        for _ in benchmark.scaledIterations {
            state.next += 1
            try state.kv.store(state.encoder.encode(state.next), forKey: Keys.counter)
        }
    }
}
