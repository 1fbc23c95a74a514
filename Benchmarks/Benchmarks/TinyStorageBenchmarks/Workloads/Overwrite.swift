import Benchmark
import Foundation
import TinyStorage

/// (a) Overwrite one Int key, 1,000 times per iteration, in a store pre-filled with 1,000 profiles.
/// Every value differs from the last, so every call is a real commit.
func registerOverwriteBenchmarks() {
    registerTinyStorageOverwrite("a overwrite Int: TinyStorage", prefill: 1_000)
    registerOverwriteBesidePwrite("a overwrite Int: TinyStorage beside pwrite", other: nil)
    #if os(Linux)
    registerOverwriteFloorBesidePwrite()
    #endif

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

/// A store pre-filled with profiles whose counter key the overwrite workloads store new Ints
/// to, optionally with another process on it (a writer is switched on, and seen, before measuring).
final class OverwriteState {
    let directory: ScratchDirectory
    let storage: TinyStorage
    let other: ChildStore?
    private var next = 0

    init(
        label: String, prefill: Int = 1_000, durability: TinyStorage.Durability = .standard,
        other role: ChildStore.Role? = nil
    ) throws {
        directory = ScratchDirectory(label)
        storage = .open(directory, durability: durability)
        storage.prefill(profiles: prefill)
        storage.store(0, forKey: Keys.counter)
        let directory = directory
        other = try role.map { try ChildStore(role: $0, directory: directory) }
        if case .writer = role { other?.setWriting(true, observedBy: storage) }
    }

    /// One commit: a value the key has not held before.
    @inline(__always)
    func storeNext() {
        next += 1
        storage.store(next, forKey: Keys.counter)
    }

    func dispose() {
        other?.stop()
        directory.remove()
    }
}

/// One `store(_:forKey:)` of a new Int per operation, into a store pre-filled with `prefill` profiles.
func registerTinyStorageOverwrite(
    _ name: String, prefill: Int, durability: TinyStorage.Durability = .standard,
    configuration: Benchmark.Configuration = .perOperation()
) {
    register(
        name, configuration,
        setUp: { try OverwriteState(label: "overwrite-\(prefill)", prefill: prefill, durability: durability) },
        tearDown: { $0.dispose() }
    ) { benchmark, state in
        for _ in benchmark.scaledIterations { state.storeNext() }
    }
}

/// Issue 12's overwrite target is a fraction of one `pwrite`: both are timed in turns
/// (``timeInTurns(rounds:_:_:)``), 100 stores then 100 40-byte `pwrite`s appending to a file
/// (as a commit appends today), 1,000 of each per iteration. With `other`, another process has the
/// store open meanwhile.
func registerOverwriteBesidePwrite(_ name: String, other role: ChildStore.Role?) {
    let paired = PairedMetrics("TinyStorage", beside: "pwrite 40 B")
    register(
        name, overwritesBesidePwrite(paired),
        setUp: {
            let overwrite = try OverwriteState(label: "overwrite-beside", other: role)
            return (overwrite, try RawAppendFile(path: overwrite.directory.path("raw.log"), space: .growing))
        },
        tearDown: { $0.0.dispose() }
    ) { benchmark, state in
        let (overwrite, file) = state
        paired.record(overwritesInTurns(with: file) { overwrite.storeNext() }, operations: 1_000, in: benchmark)
    }
}

#if os(Linux)
/// ``OverwriteFloor`` timed as the store's overwrite is in ``registerOverwriteBesidePwrite(_:other:)``:
/// a new Int for the counter key of 1,001 each time, in turns with the same `pwrite`s.
func registerOverwriteFloorBesidePwrite() {
    let paired = PairedMetrics("overwrite floor", beside: "pwrite 40 B")
    final class State {
        let directory = ScratchDirectory("overwrite-floor-beside")
        let floor: OverwriteFloor
        let file: RawAppendFile
        var next = 0
        init() throws {
            floor = try OverwriteFloor(keys: (0..<1_000).map(Keys.key) + [Keys.counter], capacity: 1 << 20)
            file = try RawAppendFile(path: directory.path("raw.log"), space: .growing)
        }
        func dispose() {
            floor.dispose()
            directory.remove()
        }
    }
    register(
        "a overwrite Int: floor beside pwrite", overwritesBesidePwrite(paired), setUp: { try State() },
        tearDown: { $0.dispose() }
    ) { benchmark, state in
        let totals = overwritesInTurns(with: state.file) {
            state.next += 1
            state.floor.overwrite(state.next, forKey: Keys.counter)
        }
        paired.record(totals, operations: 1_000, in: benchmark)
    }
}
#endif

/// How the overwrites beside `pwrite` are run: 1,000 of each per iteration, up to 1,000 iterations.
private func overwritesBesidePwrite(_ paired: PairedMetrics) -> Benchmark.Configuration {
    .init(
        metrics: paired.all, warmupIterations: 1, scalingFactor: .one, maxDuration: .seconds(3), maxIterations: 1_000)
}

/// 1,000 calls of `overwrite`, 100 at a time, in turns with 100 `pwrite`s to `file` each time.
private func overwritesInTurns(with file: RawAppendFile, _ overwrite: () -> Void) -> (first: UInt64, second: UInt64) {
    timeInTurns(rounds: 10, { for _ in 0..<100 { overwrite() } }, { for _ in 0..<100 { file.append() } })
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
