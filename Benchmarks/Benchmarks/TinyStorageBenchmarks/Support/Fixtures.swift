import Benchmark
import Foundation
@_spi(Benchmarks) import TinyStorage

/// A typical small `Codable` value. Its JSON (sorted keys, as TinyStorage writes it) is 109–113
/// bytes, about 111 on average.
struct Profile: Codable, Sendable, Equatable {
    var name: String
    var email: String
    var streak: Int
    var score: Double
    var isPremium: Bool
    var tags: [String]

    static func sample(_ index: Int) -> Profile {
        let number = Keys.padded(index)
        return Profile(
            name: "User \(number)", email: "u\(number)@ex.com", streak: index % 365,
            score: Double(index % 100) + 0.5, isPremium: index.isMultiple(of: 2), tags: ["swift", "ios"])
    }
}

/// A typical short text value: 111 ASCII bytes (113 as JSON), different for every index, with
/// nothing JSON has to escape.
enum Text {
    static let byteCount = 111

    static func sample(_ index: Int) -> String {
        let head = "Note " + Keys.padded(index) + ": "
        return head + String(repeating: "x", count: byteCount - head.utf8.count)
    }
}

/// Key names shared by every backend, so all three store the same data.
enum Keys {
    /// The key that the overwrite and durable-commit workloads write again and again.
    static let counter = "counter"

    /// `key-000042`: ten ASCII bytes, short enough for Swift's inline small strings.
    static func key(_ index: Int) -> String { "key-" + padded(index) }

    static func padded(_ index: Int) -> String {
        let digits = String(index)
        return String(repeating: "0", count: max(0, 6 - digits.count)) + digits
    }

    /// `count` keys drawn uniformly from the first `keyCount`, the same on every run.
    static func randomKeys(count: Int, among keyCount: Int, seed: UInt64 = 0x5EED) -> [String] {
        var generator = SplitMix64(seed: seed)
        return (0..<count).map { _ in key(Int(generator.next() % UInt64(keyCount))) }
    }
}

/// A tiny deterministic generator, so "random" keys are identical for every backend and run.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE5_E9B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// JSON exactly as TinyStorage stores it (sorted keys), used for SQLite and UserDefaults values.
enum JSON {
    /// A new encoder with sorted keys; competitors reuse one, as a careful app would.
    static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }

    static func encode(_ value: some Encodable) -> Data {
        // NB: encoding these fixtures cannot fail; a failure here is a bug in the benchmark.
        try! encoder.encode(value)
    }
}

/// A fresh directory for one benchmark's files, removed at teardown.
///
/// Lives under `$TINYSTORAGE_BENCH_DIR` when set, otherwise the system temporary directory. It must
/// be on a real disk (not tmpfs) for the durable-commit workload to mean anything.
final class ScratchDirectory {
    let url: URL
    private var counter = 0

    init(_ label: String) {
        let environment = ProcessInfo.processInfo.environment
        let base =
            environment["TINYSTORAGE_BENCH_DIR"].map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.temporaryDirectory
        url = base.appendingPathComponent("tinystorage-bench-\(getpid())-\(label)")
        try? FileManager.default.removeItem(at: url)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// A path inside the directory that no earlier call returned.
    func uniqueName(_ prefix: String) -> String {
        counter += 1
        return "\(prefix)-\(counter)"
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    /// Deletes the directory, once no background compaction is rewriting a store inside it (one
    /// still running would log that its files vanished).
    func remove() {
        TinyStorage._waitForBackgroundCompactions()
        try? FileManager.default.removeItem(at: url)
    }
}

extension TinyStorage {
    /// Opens `name` inside `directory`, logging only errors.
    static func open(
        _ directory: ScratchDirectory, name: String = "store", durability: Durability = .standard
    ) -> TinyStorage {
        TinyStorage(insideDirectory: directory.url, name: name, durability: durability)
    }

    /// Creates the store's files with a first commit, then empties it again: an empty store,
    /// ready to be written to without creating anything.
    func createEmpty() {
        store(0, forKey: "created")
        remove(key: "created")
    }

    /// Fills the store with `count` profiles under `key-000000`… in one commit.
    func prefill(profiles count: Int) {
        var items: [String: any Encodable] = [:]
        items.reserveCapacity(count)
        for index in 0..<count { items[Keys.key(index)] = Profile.sample(index) }
        bulkStore(items: items)
    }

    /// Fills the store with `count` integers under `key-000000`… in one commit.
    func prefill(integers count: Int) {
        var items: [String: any Encodable] = [:]
        for index in 0..<count { items[Keys.key(index)] = index }
        bulkStore(items: items)
    }
}

/// Holds a benchmark's state between `setup` and `teardown`.
///
/// NB: the runner calls setup, the measured closure and teardown one after another, never at
/// the same time, so the unchecked state is never raced.
final class StateBox<State>: @unchecked Sendable {
    var state: State?
}

/// Registers a benchmark whose state `setUp` builds before warm-up (unmeasured) and `tearDown`
/// disposes of afterwards (unmeasured).
func register<State>(
    _ name: String,
    _ configuration: Benchmark.Configuration,
    setUp: @escaping () throws -> State,
    tearDown: @escaping (State) -> Void = { _ in },
    body: @escaping (Benchmark, State) throws -> Void
) {
    let box = StateBox<State>()
    Benchmark(
        name, configuration: configuration,
        closure: { benchmark in
            guard let state = box.state else { return benchmark.error("setup did not run") }
            do { try body(benchmark, state) } catch { benchmark.error("\(name): \(error)") }
        },
        setup: { box.state = try setUp() },
        teardown: {
            if let state = box.state { tearDown(state) }
            box.state = nil
        })
}

extension Benchmark.Configuration {
    /// For workloads timed per operation: each iteration runs 1,000 operations
    /// (`benchmark.scaledIterations`), and the `*` figures are per operation.
    static func perOperation(
        seconds: Int = 2, iterations: Int = 1_000, metrics: [BenchmarkMetric] = Metrics.standard
    ) -> Self {
        .init(
            metrics: metrics, warmupIterations: 1, scalingFactor: .kilo,
            maxDuration: .seconds(seconds), maxIterations: iterations)
    }

    /// For workloads timed per iteration (one cold open, one durable commit…).
    static func perIteration(
        seconds: Int = 2, iterations: Int = 1_000, metrics: [BenchmarkMetric] = Metrics.standard
    ) -> Self {
        .init(
            metrics: metrics, warmupIterations: 1, scalingFactor: .one,
            maxDuration: .seconds(seconds), maxIterations: iterations)
    }
}

enum Metrics {
    static let standard: [BenchmarkMetric] = [.wallClock, .throughput, .mallocCountTotal]
}
