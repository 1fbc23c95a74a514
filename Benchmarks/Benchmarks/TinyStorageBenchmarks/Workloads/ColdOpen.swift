import Benchmark
import Foundation
import GRDB
import TinyStorage

/// (c) Open an existing 1,000-profile store (about 120 KB) and read one value, closing it again.
/// The file is in the OS page cache, as it is for an app relaunched a moment after it last ran.
/// Measured until the value is in hand; closing the store again is not measured.
func registerColdOpenBenchmarks() {
    final class TinyState {
        let directory = ScratchDirectory("cold")
        init() { TinyStorage.open(directory, name: "cold").prefill(profiles: 1_000) }
    }
    register(
        "c cold open + 1 read: TinyStorage", .perIteration(), setUp: TinyState.init,
        tearDown: { $0.directory.remove() }
    ) { benchmark, state in
        let storage = TinyStorage.open(state.directory, name: "cold")
        blackHole(storage.retrieve(type: Profile.self, forKey: Keys.key(500)))
        withExtendedLifetime(storage) { benchmark.stopMeasurement() }
    }

    // NB: corelibs Foundation caches every suite it has read for the life of the process, so
    // opening the same suite twice reads nothing the second time. Each iteration opens a fresh
    // byte-identical copy of the suite's plist under a new name instead.
    final class DefaultsState {
        static let copies = 300
        let source = UserDefaultsSuite("cold")
        var names: [String] = []
        let decoder = JSONDecoder()
        init() throws {
            for index in 0..<1_000 { source.defaults.set(JSON.encode(Profile.sample(index)), forKey: Keys.key(index)) }
            source.defaults.synchronize()
            for copy in 0..<Self.copies {
                let name = "\(source.name)-\(copy)"
                try FileManager.default.copyItem(at: source.plistURL, to: UserDefaultsSuite.plistURL(suite: name))
                names.append(name)
            }
        }
        func destroy() {
            for name in names { try? FileManager.default.removeItem(at: UserDefaultsSuite.plistURL(suite: name)) }
            source.destroy()
        }
    }
    register(
        "c cold open + 1 read: UserDefaults",
        .perIteration(seconds: 2, iterations: DefaultsState.copies - 1),
        setUp: DefaultsState.init, tearDown: { $0.destroy() }
    ) { benchmark, state in
        guard !state.names.isEmpty, let defaults = UserDefaults(suiteName: state.names.removeLast()) else {
            return benchmark.error("out of fresh suite copies")
        }
        guard let data = defaults.data(forKey: Keys.key(500)) else { return benchmark.error("missing key") }
        blackHole(try state.decoder.decode(Profile.self, from: data))
        withExtendedLifetime(defaults) { benchmark.stopMeasurement() }
    }

    final class SQLiteState {
        let directory = ScratchDirectory("cold-sqlite")
        let decoder = JSONDecoder()
        var path: String { directory.path("kv.sqlite") }
        init() throws { try SQLiteKV(path: directory.path("kv.sqlite")).prefill(SQLiteKV.profiles(1_000)) }
    }
    register(
        "c cold open + 1 read: SQLite", .perIteration(), setUp: SQLiteState.init,
        tearDown: { $0.directory.remove() }
    ) { benchmark, state in
        let kv = try SQLiteKV(path: state.path, createTable: false)
        guard let data = try kv.value(forKey: Keys.key(500)) else { return benchmark.error("missing key") }
        blackHole(try state.decoder.decode(Profile.self, from: data))
        withExtendedLifetime(kv) { benchmark.stopMeasurement() }
    }
}
