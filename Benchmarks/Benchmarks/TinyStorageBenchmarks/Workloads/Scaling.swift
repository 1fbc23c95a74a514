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
}

/// A directory holding one TinyStorage store of `keyCount` profiles, closed again.
final class PrebuiltStore {
    let directory: ScratchDirectory
    let keyCount: Int
    init(keyCount: Int) {
        self.keyCount = keyCount
        directory = ScratchDirectory("prebuilt-\(keyCount)")
        TinyStorage.open(directory).prefill(profiles: keyCount)
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
/// against the live data: the UTF-8 keys plus the JSON values.
private func registerMemory(keyCount: Int, size: String) {
    final class State {
        let prebuilt: PrebuiltStore
        let liveDataBytes: Int
        init(keyCount: Int) {
            prebuilt = PrebuiltStore(keyCount: keyCount)
            liveDataBytes = (0..<keyCount).reduce(0) { total, index in
                total + Keys.key(index).utf8.count + JSON.encode(Profile.sample(index)).count
            }
        }
    }
    let configuration = Benchmark.Configuration.perIteration(
        seconds: 3, iterations: keyCount == 1_000 ? 50 : 5,
        metrics: [
            .wallClock, .mallocCountTotal, .peakMemoryResident, MemoryMetric.openedPercent,
            MemoryMetric.readPercent, MemoryMetric.openedBytesPerKey, MemoryMetric.allocationsPerKey,
        ])
    register(
        "f memory @\(size) keys: TinyStorage", configuration, setUp: { State(keyCount: keyCount) },
        tearDown: { $0.prebuilt.directory.remove() }
    ) { benchmark, state in
        let before = HeapUsage.now
        let storage = state.prebuilt.open()
        blackHole(storage.retrieve(type: Profile.self, forKey: Keys.key(0)))
        let opened = HeapUsage.now - before
        for index in 0..<state.prebuilt.keyCount {
            blackHole(storage.retrieve(type: Profile.self, forKey: Keys.key(index)))
        }
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
private func registerMemory(keyCount: Int, size: String) {}
#endif
