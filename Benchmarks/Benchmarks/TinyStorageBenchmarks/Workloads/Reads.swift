import Benchmark
import Foundation
import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// (b) Typed reads of random keys in a 1,000-key store: 1,000 reads per iteration, walking a
/// precomputed list of 100,000 random keys, for Int values, ~111-byte profiles and 111-byte
/// strings (TinyStorage and its baseline only: issue 12 compares a 111-byte value).
func registerReadBenchmarks() {
    registerReads(of: Int.self, label: "Int", make: { $0 })
    registerReads(of: Profile.self, label: "struct", make: Profile.sample)
    registerReads(of: String.self, label: "String", make: Text.sample, competitors: false)
}

/// Walks a fixed list of random keys, 1,000 per iteration, the same for every backend.
final class RandomKeys {
    let keys: [String]
    private var cursor = 0

    init(among keyCount: Int) { keys = Keys.randomKeys(count: 100_000, among: keyCount) }

    @inline(__always)
    func next() -> String {
        defer { cursor = cursor + 1 == keys.count ? 0 : cursor + 1 }
        return keys[cursor]
    }
}

/// The baseline the read targets are relative to: a `[String: Value]` behind a pthread mutex,
/// what a hand-written in-memory cache looks like.
final class LockedDictionary<Value> {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let dictionary: [String: Value]

    init(_ dictionary: [String: Value]) {
        self.dictionary = dictionary
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    @inline(__always)
    func value(forKey key: String) -> Value? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return dictionary[key]
    }
}

/// The backends' states for the read workloads, one per backend.
final class TinyReadState {
    let directory: ScratchDirectory
    let storage: TinyStorage
    let keys = RandomKeys(among: 1_000)
    init(label: String, values: [String: any Encodable]) {
        directory = ScratchDirectory("read-\(label)")
        storage = .open(directory)
        storage.bulkStore(items: values)
    }

    /// Reads every key once, so measured reads see the steady state (decoded values cached).
    func warm<Value: Decodable & Sendable>(_ type: Value.Type) {
        for key in storage.allKeys { _ = storage.retrieve(type: Value.self, forKey: key) }
    }
}

final class DefaultsReadState {
    let suite: UserDefaultsSuite
    let keys = RandomKeys(among: 1_000)
    let decoder = JSONDecoder()
    init(label: String) { suite = UserDefaultsSuite("read-\(label)") }
}

final class SQLiteReadState {
    let directory: ScratchDirectory
    let kv: SQLiteKV
    let keys = RandomKeys(among: 1_000)
    let decoder = JSONDecoder()
    init(label: String, items: [(key: String, value: Data)]) throws {
        directory = ScratchDirectory("read-sqlite-\(label)")
        kv = try SQLiteKV(path: directory.path("kv.sqlite"))
        try kv.prefill(items)
    }
}

final class BaselineReadState<Value> {
    let dictionary: LockedDictionary<Value>
    let keys = RandomKeys(among: 1_000)
    init(_ values: [String: Value]) { dictionary = LockedDictionary(values) }
}

func registerReads<Value: Codable & Sendable>(
    of type: Value.Type, label: String, make: @escaping (Int) -> Value, competitors: Bool = true
) {
    let count = 1_000

    let warmedStore = {
        let state = TinyReadState(
            label: label,
            values: Dictionary(uniqueKeysWithValues: (0..<count).map { (Keys.key($0), make($0) as any Encodable) }))
        state.warm(Value.self)
        return state
    }
    let baseline = { BaselineReadState(Dictionary(uniqueKeysWithValues: (0..<count).map { (Keys.key($0), make($0)) })) }

    register(
        "b read \(label): TinyStorage", .perOperation(), setUp: warmedStore, tearDown: { $0.directory.remove() }
    ) { benchmark, state in
        for _ in benchmark.scaledIterations {
            blackHole(state.storage.retrieve(type: Value.self, forKey: state.keys.next()))
        }
    }

    register("b read \(label): locked dictionary (baseline)", .perOperation(), setUp: baseline) { benchmark, state in
        for _ in benchmark.scaledIterations { blackHole(state.dictionary.value(forKey: state.keys.next())) }
    }

    // NB: issue 12's read targets are within 10-20% of the dictionary, so both are also timed in turns.
    let paired = PairedMetrics("TinyStorage", beside: "locked dictionary")
    register(
        "b read \(label): TinyStorage beside locked dictionary",
        paired.inTurns,
        setUp: { (tiny: warmedStore(), baseline: baseline()) }, tearDown: { $0.tiny.directory.remove() }
    ) { benchmark, state in
        let (tiny, locked) = (state.tiny, state.baseline)
        let totals = timeInTurns(
            rounds: 10,
            { for _ in 0..<100 { blackHole(tiny.storage.retrieve(type: Value.self, forKey: tiny.keys.next())) } },
            { for _ in 0..<100 { blackHole(locked.dictionary.value(forKey: locked.keys.next())) } })
        paired.record(totals, operations: 1_000, in: benchmark)
    }

    guard competitors else { return }
    register(
        "b read \(label): UserDefaults", .perOperation(),
        setUp: {
            let state = DefaultsReadState(label: label)
            for index in 0..<count {
                // Ints as UserDefaults stores them natively; other values as JSON `Data`.
                let value = make(index)
                state.suite.defaults.set((value as? Int) ?? JSON.encode(value), forKey: Keys.key(index))
            }
            state.suite.defaults.synchronize()
            return state
        },
        tearDown: { $0.suite.destroy() }
    ) { benchmark, state in
        let defaults = state.suite.defaults
        if Value.self == Int.self {
            for _ in benchmark.scaledIterations { blackHole(defaults.integer(forKey: state.keys.next())) }
        } else {
            for _ in benchmark.scaledIterations {
                guard let data = defaults.data(forKey: state.keys.next()) else { return benchmark.error("missing key") }
                blackHole(try state.decoder.decode(Value.self, from: data))
            }
        }
    }

    register(
        "b read \(label): SQLite", .perOperation(),
        setUp: { try SQLiteReadState(label: label, items: (0..<count).map { (Keys.key($0), JSON.encode(make($0))) }) },
        tearDown: { $0.directory.remove() }
    ) { benchmark, state in
        for _ in benchmark.scaledIterations {
            guard let data = try state.kv.value(forKey: state.keys.next()) else {
                return benchmark.error("missing key")
            }
            blackHole(try state.decoder.decode(Value.self, from: data))
        }
    }
}
