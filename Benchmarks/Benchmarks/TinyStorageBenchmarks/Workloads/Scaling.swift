import Benchmark
import Foundation
import TinyStorage

/// (f) How TinyStorage's costs grow with the number of keys: the per-store cost, a read, a cold
/// open, and heap memory at 100,000 keys against 1,000.
func registerScalingBenchmarks() {
    for keyCount in [1_000, 100_000] {
        let size = keyCount == 1_000 ? "1k" : "100k"
        registerTinyStorageOverwrite("f overwrite Int @\(size) keys: TinyStorage", prefill: keyCount)
        registerScaledRead(keyCount: keyCount, size: size)
        registerScaledOpen(keyCount: keyCount, size: size)
        registerMemory(keyCount: keyCount, size: size)
    }
    registerMemory(keyCount: 10_000, size: "10k", kilobyteValues: true)
}

/// The value of key `index` in a store of 1 KB values: a string of 1,000 characters.
func kilobyteValue(_ index: Int) -> String {
    String(repeating: Character(UnicodeScalar(UInt8(97 + index % 26))), count: 1_000)
}

/// A directory holding one TinyStorage store of `keyCount` profiles, closed again.
final class PrebuiltStore {
    let directory: ScratchDirectory
    let keyCount: Int
    init(keyCount: Int, kilobyteValues: Bool = false) {
        self.keyCount = keyCount
        directory = ScratchDirectory("prebuilt-\(keyCount)")
        let storage = TinyStorage.open(directory)
        if kilobyteValues {
            let items: [String: any Encodable] = Dictionary(
                uniqueKeysWithValues: (0..<keyCount).map { (Keys.key($0), kilobyteValue($0)) })
            storage.bulkStore(items: items)
        } else {
            storage.prefill(profiles: keyCount)
        }
    }
    func open() -> TinyStorage { .open(directory) }
}

private func registerScaledRead(keyCount: Int, size: String) {
    final class State {
        let prebuilt: PrebuiltStore
        let storage: TinyStorage
        let keys: RandomKeys
        init(keyCount: Int) {
            prebuilt = PrebuiltStore(keyCount: keyCount)
            storage = prebuilt.open()
            keys = RandomKeys(among: keyCount)
            // Steady state: every value decoded (and cached) once before measuring.
            for index in 0..<keyCount { _ = storage.retrieve(type: Profile.self, forKey: Keys.key(index)) }
        }
    }
    register(
        "f read struct @\(size) keys: TinyStorage", .perOperation(), setUp: { State(keyCount: keyCount) },
        tearDown: { $0.prebuilt.directory.remove() }
    ) { benchmark, state in
        for _ in benchmark.scaledIterations {
            blackHole(state.storage.retrieve(type: Profile.self, forKey: state.keys.next()))
        }
    }
}

private func registerScaledOpen(keyCount: Int, size: String) {
    register(
        "f cold open + 1 read @\(size) keys: TinyStorage", .perIteration(seconds: 3, iterations: 1_000),
        setUp: { PrebuiltStore(keyCount: keyCount) }, tearDown: { $0.directory.remove() }
    ) { benchmark, prebuilt in
        let storage = prebuilt.open()
        blackHole(storage.retrieve(type: Profile.self, forKey: Keys.key(keyCount / 2)))
        withExtendedLifetime(storage) { benchmark.stopMeasurement() }
    }
}

#if canImport(MallocInterposerSwift)
enum MemoryMetric {
    static let openedPercent = BenchmarkMetric.custom("heap/live data % (opened)", useScalingFactor: false)
    static let readPercent = BenchmarkMetric.custom("heap/live data % (all read)", useScalingFactor: false)
    static let openedBytesPerKey = BenchmarkMetric.custom("heap bytes/key (opened)", useScalingFactor: false)
    static let allocationsPerKey = BenchmarkMetric.custom("heap allocations/key (opened)", useScalingFactor: false)
}

/// Heap held by an open store, measured as the malloc interposer's live bytes before and after,
/// against the live data: the UTF-8 keys plus the JSON values. `kilobyteValues`: issue 32's
/// widget-sized store, each value a string of 1,000 characters (1,002 bytes of JSON), read as
/// `String`; otherwise profiles of about 110 bytes.
private func registerMemory(keyCount: Int, size: String, kilobyteValues: Bool = false) {
    final class State {
        let prebuilt: PrebuiltStore
        let liveDataBytes: Int
        init(keyCount: Int, kilobyteValues: Bool) {
            prebuilt = PrebuiltStore(keyCount: keyCount, kilobyteValues: kilobyteValues)
            liveDataBytes = (0..<keyCount).reduce(0) { total, index in
                let value = kilobyteValues ? JSON.encode(kilobyteValue(index)) : JSON.encode(Profile.sample(index))
                return total + Keys.key(index).utf8.count + value.count
            }
        }
    }
    let configuration = Benchmark.Configuration.perIteration(
        seconds: 3, iterations: keyCount == 1_000 ? 50 : 5,
        metrics: [
            .wallClock, .mallocCountTotal, .peakMemoryResident, MemoryMetric.openedPercent,
            MemoryMetric.readPercent, MemoryMetric.openedBytesPerKey, MemoryMetric.allocationsPerKey,
        ])
    let name = kilobyteValues ? "f memory @\(size) keys of 1 KB: TinyStorage" : "f memory @\(size) keys: TinyStorage"
    register(
        name, configuration, setUp: { State(keyCount: keyCount, kilobyteValues: kilobyteValues) },
        tearDown: { $0.prebuilt.directory.remove() }
    ) { benchmark, state in
        func read(_ storage: TinyStorage, _ index: Int) {
            if kilobyteValues {
                blackHole(storage.retrieve(type: String.self, forKey: Keys.key(index)))
            } else {
                blackHole(storage.retrieve(type: Profile.self, forKey: Keys.key(index)))
            }
        }
        let before = HeapUsage.now
        let storage = state.prebuilt.open()
        read(storage, 0)
        let opened = HeapUsage.now - before
        for index in 0..<state.prebuilt.keyCount { read(storage, index) }
        let read = HeapUsage.now - before
        withExtendedLifetime(storage) {}
        let keys = state.prebuilt.keyCount
        benchmark.measurement(MemoryMetric.openedPercent, opened.liveBytes * 100 / state.liveDataBytes)
        benchmark.measurement(MemoryMetric.readPercent, read.liveBytes * 100 / state.liveDataBytes)
        benchmark.measurement(MemoryMetric.openedBytesPerKey, opened.liveBytes / keys)
        benchmark.measurement(MemoryMetric.allocationsPerKey, opened.liveAllocations / keys)
    }
}
#else
private func registerMemory(keyCount: Int, size: String, kilobyteValues: Bool = false) {}
#endif
