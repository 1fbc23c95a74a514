import Benchmark
import Foundation
import TinyStorage

/// (b) Issue 13: cached reads through typed keys (`storage[key]`) in a 1,000-key store whose values
/// are all in the current shape, with keys that declare no older shapes and with keys that declare
/// two (`migrating(from:)`). Each read builds its key, as `static var` keys are built on every use:
/// a key keeps its first older shape inline and the others in an array, so building the key with
/// two costs one allocation, measured here.
func registerTypedReadBenchmarks() {
    registerTypedReads(
        label: "Int", make: { $0 }, plain: TinyStorage.Key.count, migrating: TinyStorage.Key.countMigrating)
    registerTypedReads(
        label: "struct", make: Profile.sample, plain: TinyStorage.Key.profile,
        migrating: TinyStorage.Key.profileMigrating)
}

extension TinyStorage.Key where Value == Int {
    static func count(_ name: String) -> Self { .init(name, default: 0) }

    static func countMigrating(_ name: String) -> Self {
        .init(name, default: 0)
            .migrating(from: String.self) { Int($0) ?? 0 }
            .migrating(from: Double.self) { Int($0) }
    }
}

extension TinyStorage.Key where Value == Profile {
    static func profile(_ name: String) -> Self { .init(name, default: .blank) }

    static func profileMigrating(_ name: String) -> Self {
        .init(name, default: .blank)
            .migrating(from: ProfileV2.self) { $0.upgraded }
            .migrating(from: ProfileV1.self) { $0.upgraded.upgraded }
    }
}

extension Profile {
    /// A default that allocates nothing, as most defaults.
    static var blank: Profile { Profile(name: "", email: "", streak: 0, score: 0, isPremium: false, tags: []) }
}

/// Two older shapes of ``Profile``: what the "with migrations" keys declare (never stored).
struct ProfileV1: Codable, Sendable {
    var name: String

    var upgraded: ProfileV2 { ProfileV2(name: name, email: "") }
}

struct ProfileV2: Codable, Sendable {
    var name: String
    var email: String

    var upgraded: Profile {
        Profile(name: name, email: email, streak: 0, score: 0, isPremium: false, tags: [])
    }
}

func registerTypedReads<Value: Codable & Sendable>(
    label: String, make: @escaping (Int) -> Value, plain: @escaping (String) -> TinyStorage.Key<Value>,
    migrating: @escaping (String) -> TinyStorage.Key<Value>
) {
    let warmedStore = {
        let state = TinyReadState(
            label: "typed-\(label)",
            values: Dictionary(uniqueKeysWithValues: (0..<1_000).map { (Keys.key($0), make($0) as any Encodable) }))
        state.warm(Value.self)
        return state
    }

    for (name, key) in [("typed key", plain), ("typed key with migrations", migrating)] {
        register(
            "b read \(label): TinyStorage \(name)", .perOperation(), setUp: warmedStore,
            tearDown: { $0.directory.remove() }
        ) { benchmark, state in
            for _ in benchmark.scaledIterations { blackHole(state.storage[key(state.keys.next())]) }
        }
    }

    // NB: the two differ by less than the drift between runs a minute apart, so also in turns.
    let paired = PairedMetrics("with migrations", beside: "without")
    register(
        "b read \(label): typed key with migrations beside without",
        paired.inTurns,
        setUp: warmedStore, tearDown: { $0.directory.remove() }
    ) { benchmark, state in
        let totals = timeInTurns(
            rounds: 10,
            { for _ in 0..<100 { blackHole(state.storage[migrating(state.keys.next())]) } },
            { for _ in 0..<100 { blackHole(state.storage[plain(state.keys.next())]) } })
        paired.record(totals, operations: 1_000, in: benchmark)
    }
}
