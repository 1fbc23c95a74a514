#if canImport(MallocInterposerSwift)
import MallocInterposerSwift

/// Bytes currently allocated with `malloc` and not yet freed, as counted by the benchmark's
/// malloc interposer (requested sizes, across all threads; allocator overhead not included).
///
/// Only differences between two readings are meaningful, and only while the interposer counts,
/// which it does for any benchmark that asks for a malloc metric.
struct HeapUsage {
    var liveBytes: Int
    var liveAllocations: Int

    static var now: HeapUsage {
        let stats = MallocInterposerSwift.getStatistics()
        return HeapUsage(
            liveBytes: stats.mallocBytesCount - stats.freeBytesCount,
            liveAllocations: stats.mallocCount - stats.freeCount)
    }

    static func - (lhs: HeapUsage, rhs: HeapUsage) -> HeapUsage {
        HeapUsage(
            liveBytes: lhs.liveBytes - rhs.liveBytes, liveAllocations: lhs.liveAllocations - rhs.liveAllocations)
    }
}
#endif
