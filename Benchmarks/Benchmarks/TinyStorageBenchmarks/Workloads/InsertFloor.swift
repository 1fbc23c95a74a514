import CBenchmarkSupport

#if canImport(Glibc)
import Glibc
#endif

#if os(Linux)
/// The least one insert of a String can cost in a store that keeps an in-memory index over a
/// file mapping, with no system call: what stands in the way of issue 12's String insert target.
///
/// Per insert: the value's JSON (a string with nothing to escape is its UTF-8 bytes between
/// quotes) copied into a new `[UInt8]`; then, under a `pthread_mutex_t`, the bytes inserted into
/// a `[String: [UInt8]]`, a record (4-byte length, 4-byte CRC slot, key, value) copied into a
/// `MAP_SHARED` mapping, its CRC-32C, and the new end published. Nothing more: no encoder, no
/// notification, no cross-process lock. The file's space is allocated with `posix_fallocate(3)`
/// when the floor is made, before timing; the index starts empty, as a new store's does.
///
/// Two floors, by who pays for the file's new pages (the kernel finds each one a zeroed page of
/// cache, maps it and tells the file system it is dirty, about 27 records of 150 bytes apart):
/// - ``Pages/faultedInBeforeTiming``: nobody in the timed inserts: every page is faulted in
///   first. The least an insert costs where all of that work is done on another core before the
///   inserts reach the page, as the store's background prefault tries to.
/// - ``Pages/faultedInByInserts``: the inserting thread, at its first write to each page: the
///   least an insert costs where nothing runs beside it.
final class InsertFloor {
    enum Pages {
        case faultedInBeforeTiming
        case faultedInByInserts
    }

    /// Bytes before the first record: the mapping's first word holds the end of the last record.
    private static let headerSize = 64

    private let file: MappedFile
    private let lock = LocalMutex()
    private var index: [String: [UInt8]] = [:]
    private var end = InsertFloor.headerSize

    /// A new, empty floor whose file holds `capacity` bytes.
    init(capacity: Int, pages: Pages) throws {
        file = try MappedFile(label: "insert-floor", size: capacity)
        if pages == .faultedInBeforeTiming { file.faultIn() }
    }

    @inline(__always)
    func insert(_ value: String, forKey key: String) {
        var json: [UInt8] = []
        json.reserveCapacity(value.utf8.count + 2)
        json.append(UInt8(ascii: "\""))
        json.append(contentsOf: value.utf8)
        json.append(UInt8(ascii: "\""))

        pthread_mutex_lock(lock.mutex)
        index[key] = json
        var keyText = key
        keyText.withUTF8 { keyBytes in
            json.withUnsafeBytes { valueBytes in
                let record = file.base + end
                let length = 8 + keyBytes.count + valueBytes.count
                precondition(end + length <= file.size, "the insert floor's file is full")
                record.storeBytes(of: UInt32(length - 8).littleEndian, as: UInt32.self)
                (record + 8).copyMemory(from: keyBytes.baseAddress!, byteCount: keyBytes.count)
                (record + 8 + keyBytes.count).copyMemory(from: valueBytes.baseAddress!, byteCount: valueBytes.count)
                let crc = bench_crc32c(bench_crc32c(0, record, 4), record + 8, length - 8)
                (record + 4).storeBytes(of: crc.littleEndian, as: UInt32.self)
                end += length
            }
        }
        // NB: an atomic release store, as a store whose readers (other threads or processes)
        // load the end and then read the records before it needs; a plain `mov` on x86-64.
        bench_store_release(file.base.assumingMemoryBound(to: UInt64.self), UInt64(end))
        pthread_mutex_unlock(lock.mutex)
    }

    func dispose() { file.dispose() }
}
#endif
