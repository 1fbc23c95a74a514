import Benchmark
import Dispatch
import Foundation
import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// (g) Several processes on one store (issue 3): a cached read while another process writes to the
/// store, and a commit while another process has the store open or writes to it. The time from a
/// commit to `didChangeNotification` in another process is in NotificationLatency.swift.
///
/// The other process is this benchmark executable again (``ChildStore``).
func registerCrossProcessBenchmarks() {
    registerReadsBesideWriter(label: "1,000/s", pauseMicroseconds: 1_000)
    registerReadsBesideWriter(label: "flat out", pauseMicroseconds: 0)

    // NB: "has it open" is issue 12's multi-process overwrite: the other process only keeps the
    // store open (as MMKV's multi-process mode is measured), so any cost is the price of sharing.
    let others: [(label: String, role: ChildStore.Role?)] = [
        ("single process", nil),
        ("another process has it open", .idle),
        ("another process writing 1,000/s", .writer(pauseMicroseconds: 1_000)),
        ("another process writing flat out", .writer(pauseMicroseconds: 0)),
    ]
    registerOverwriteBesidePwrite(
        "g overwrite Int: TinyStorage, another process has it open, beside pwrite", other: .idle)
    for (label, role) in others {
        register(
            "g overwrite Int: TinyStorage, \(label)", .perOperation(),
            setUp: { try OverwriteState(label: "cross-overwrite", other: role) }, tearDown: { $0.dispose() }
        ) { benchmark, state in
            for _ in benchmark.scaledIterations { state.storeNext() }
        }
    }
}

/// Nanoseconds per cached read, 1,000 reads of random keys in a 1,000-Int store, as in
/// `b read Int: TinyStorage`: with the other process idle, with it writing, and the second as a
/// percentage of the first.
let readIdle = BenchmarkMetric.custom("read, other process idle (ns)", useScalingFactor: false)
let readWriting = BenchmarkMetric.custom("read, other process writing (ns)", useScalingFactor: false)
let readRatio = BenchmarkMetric.custom("writing / idle (%)", useScalingFactor: false)

/// Cached reads while another process, which has the same store open, either waits or commits to
/// another key of it. Each iteration measures both, one after the other, so the two figures are
/// taken side by side and machine noise hits them alike.
private func registerReadsBesideWriter(label: String, pauseMicroseconds: Int) {
    final class State {
        let read: TinyReadState
        let other: ChildStore
        init(pauseMicroseconds: Int) throws {
            read = TinyReadState(
                label: "cross",
                values: Dictionary(uniqueKeysWithValues: (0..<1_000).map { (Keys.key($0), $0 as any Encodable) }))
            read.warm(Int.self)
            other = try ChildStore(role: .writer(pauseMicroseconds: pauseMicroseconds), directory: read.directory)
        }

        /// Nanoseconds per read, over 1,000 reads.
        func timeReads() -> Int {
            let storage = read.storage
            let start = DispatchTime.now().uptimeNanoseconds
            for _ in 0..<1_000 { blackHole(storage.retrieve(type: Int.self, forKey: read.keys.next())) }
            return Int(DispatchTime.now().uptimeNanoseconds - start) / 1_000
        }
    }
    register(
        "g read Int: TinyStorage, another process idle vs writing \(label)",
        .init(
            metrics: [readIdle, readWriting, readRatio], warmupIterations: 10, scalingFactor: .one,
            maxDuration: .seconds(10), maxIterations: 2_000),
        setUp: { try State(pauseMicroseconds: pauseMicroseconds) },
        tearDown: {
            $0.other.stop()
            $0.read.directory.remove()
        }
    ) { benchmark, state in
        state.other.setWriting(false)
        let idle = state.timeReads()
        state.other.setWriting(true, observedBy: state.read.storage)
        let writing = state.timeReads()
        benchmark.measurement(readIdle, idle)
        benchmark.measurement(readWriting, writing)
        benchmark.measurement(readRatio, writing * 100 / max(idle, 1))
    }
}
