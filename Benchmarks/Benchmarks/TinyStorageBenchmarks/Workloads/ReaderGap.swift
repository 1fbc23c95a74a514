import Benchmark
import Dispatch
import Foundation
@_spi(Benchmarks) import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// (g) Issue 32: whether another process's commits starve a reader. An app's main thread reads
/// the store between other work and is also where the store announces changes; here a serial
/// queue plays that thread: the store posts its notifications there (an observer listens, as an
/// app's would), and reads run there in short blocks, so announcements run between them as they
/// would between an app's events.
///
/// Each iteration reads for ``window`` with the other process idle, then for as long beside a
/// third process writing 8 bytes into a file of its own with `pwrite(2)` as fast as it can (the
/// floor: what sharing the machine's cores with a process that busy costs a reader, with no store
/// between them), then for as long with the other process overwriting one of its own keys of the
/// store as fast as it can, and records the longest time between two reads in each, and how many
/// reads each did.
func registerReaderGapBenchmarks() {
    register(
        "g reader longest gap: other process idle, pwrite flat out, writing flat out",
        .init(
            metrics: [gapIdle, gapFloor, gapWriting, readsIdle, readsFloor, readsWriting], warmupIterations: 1,
            scalingFactor: .one,
            maxDuration: .seconds(10), maxIterations: 20),
        setUp: { try GapReader() },
        tearDown: { $0.dispose() }
    ) { benchmark, reader in
        reader.settle()
        let idle = reader.read(for: GapReader.window)
        reader.floor.setWriting(true)
        let floor = reader.read(for: GapReader.window)
        reader.floor.setWriting(false)
        reader.other.setWriting(true, observedBy: reader.storage)
        let writing = reader.read(for: GapReader.window)
        reader.settle()
        benchmark.measurement(gapIdle, idle.longestGap / 1_000)
        benchmark.measurement(gapFloor, floor.longestGap / 1_000)
        benchmark.measurement(gapWriting, writing.longestGap / 1_000)
        benchmark.measurement(readsIdle, idle.reads)
        benchmark.measurement(readsFloor, floor.reads)
        benchmark.measurement(readsWriting, writing.reads)
    }
}

let gapIdle = BenchmarkMetric.custom("longest gap, other process idle (µs)", useScalingFactor: false)
let gapFloor = BenchmarkMetric.custom("longest gap, a process pwrite flat out (µs)", useScalingFactor: false)
let gapWriting = BenchmarkMetric.custom("longest gap, other process writing (µs)", useScalingFactor: false)
let readsIdle = BenchmarkMetric.custom("reads, other process idle", useScalingFactor: false)
let readsFloor = BenchmarkMetric.custom("reads, a process pwrite flat out", useScalingFactor: false)
let readsWriting = BenchmarkMetric.custom("reads, other process writing", useScalingFactor: false)

/// A 1,000-`Int` store read on a serial queue that is also where it announces its changes, beside
/// another process (``ChildStore``, role writer) that has it open.
final class GapReader: @unchecked Sendable {
    // @unchecked: `directory`, `storage`, `other` and `floor` are set once; `keys` is used by one block at a time.
    static let window: UInt64 = 200_000_000
    /// The reads each block does before it lets the queue run something else.
    static let readsPerBlock = 32

    let directory = ScratchDirectory("reader-gap")
    let queue = DispatchQueue(label: "reader-gap.main")
    let storage: TinyStorage
    let other: ChildStore
    /// The floor's process: `pwrite(2)` into a file of its own, flat out, while switched on.
    let floor: ChildStore
    let keys = RandomKeys(among: 1_000)
    private let observer: NSObjectProtocol

    init() throws {
        storage = TinyStorage(insideDirectory: directory.url, name: "store", notificationQueue: queue)
        storage.bulkStore(items: Dictionary(uniqueKeysWithValues: (0..<1_000).map { (Keys.key($0), $0) }))
        for key in storage.allKeys { _ = storage.integer(forKey: key) }
        // NB: an observer that does nothing, as an app's listens: posting to one costs more.
        observer = NotificationCenter.default.addObserver(
            forName: TinyStorage.didChangeNotification, object: storage, queue: nil
        ) { _ in }
        other = try ChildStore(role: .writer(pauseMicroseconds: 0), directory: directory)
        floor = try ChildStore(role: .fileWriter, directory: directory)
    }

    /// Reads random keys on ``queue`` for `nanoseconds`, in blocks of ``readsPerBlock``; returns the
    /// longest time between the ends of two consecutive reads, and how many reads there were.
    func read(for nanoseconds: UInt64) -> (longestGap: Int, reads: Int) {
        let window = ReadingWindow(reader: self, nanoseconds: nanoseconds)
        queue.async { window.readBlock() }
        window.done.wait()
        // NB: announcements queued during the window run now, before the next window starts.
        queue.sync {}
        return (Int(window.longestGap), window.reads)
    }

    /// Stops the other process's commits and returns once this store has caught up with them and
    /// announced them all, so what a window measures is not left over from the one before.
    func settle() {
        other.setWriting(false)
        _ = storage.integer(forKey: ChildStore.writerKey)
        storage._waitUntilDelivered()
        queue.sync {}
    }

    func dispose() {
        other.stop()
        floor.stop()
        queue.sync {}
        NotificationCenter.default.removeObserver(observer)
        directory.remove()
    }
}

/// One window of reads on the reader's queue: each block reads, then queues the next.
final class ReadingWindow: @unchecked Sendable {
    // @unchecked: everything but `done` is touched only by the blocks, which run one at a time on
    // the reader's serial queue, and read once `done` is signalled.
    let reader: GapReader
    let done = DispatchSemaphore(value: 0)
    let end: UInt64
    var last = DispatchTime.now().uptimeNanoseconds
    var longestGap: UInt64 = 0
    var reads = 0

    init(reader: GapReader, nanoseconds: UInt64) {
        self.reader = reader
        end = last + nanoseconds
    }

    func readBlock() {
        let storage = reader.storage
        for _ in 0..<GapReader.readsPerBlock {
            blackHole(storage.integer(forKey: reader.keys.next()))
            let now = DispatchTime.now().uptimeNanoseconds
            longestGap = max(longestGap, now - last)
            last = now
        }
        reads += GapReader.readsPerBlock
        if last < end { reader.queue.async { self.readBlock() } } else { done.signal() }
    }
}
