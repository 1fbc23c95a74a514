import Benchmark
import Foundation
import TinyStorage

/// Issue 32: the typed API (`storage[key]`, the one the documentation recommends) against the
/// string API it wraps, in turns (``timeInTurns(rounds:_:_:)``), so machine noise hits both
/// alike. Target: within 10% of each other (a ratio of at most 110%).
///
/// Reads: 1,000 cached `Int` reads of random keys in a 1,000-`Int` store, the key built on each
/// read as a `static var` key is. Overwrites: 1,000 new `Int`s stored under one key of a store
/// pre-filled with 1,000 profiles (``OverwriteState``).
func registerTypedBesideStringBenchmarks() {
    let reads = PairedMetrics("typed key", beside: "string key")
    register(
        "b read Int: typed key beside string key",
        reads.inTurns,
        setUp: {
            let state = TinyReadState(
                label: "typed-beside-string",
                values: Dictionary(uniqueKeysWithValues: (0..<1_000).map { (Keys.key($0), $0 as any Encodable) }))
            state.warm(Int.self)
            return state
        },
        tearDown: { $0.directory.remove() }
    ) { benchmark, state in
        let totals = timeInTurns(
            rounds: 10,
            { for _ in 0..<100 { blackHole(state.storage[.count(state.keys.next())]) } },
            { for _ in 0..<100 { blackHole(state.storage.integer(forKey: state.keys.next())) } })
        reads.record(totals, operations: 1_000, in: benchmark)
    }

    let overwrites = PairedMetrics("typed key", beside: "string key")
    register(
        "a overwrite Int: typed key beside string key",
        overwrites.inTurns,
        setUp: { TypedOverwriteState(try OverwriteState(label: "typed-overwrite")) },
        tearDown: { $0.overwrite.dispose() }
    ) { benchmark, state in
        let totals = timeInTurns(
            rounds: 10, { for _ in 0..<100 { state.storeNextTyped() } },
            { for _ in 0..<100 { state.overwrite.storeNext() } })
        overwrites.record(totals, operations: 1_000, in: benchmark)
    }
}

/// Stores new `Int`s to the overwrite workloads' key through a typed key.
final class TypedOverwriteState {
    let overwrite: OverwriteState
    private var next = 1 << 40

    init(_ overwrite: OverwriteState) { self.overwrite = overwrite }

    @inline(__always)
    func storeNextTyped() {
        next += 1
        overwrite.storage[.count(Keys.counter)] = next
    }
}
