import CBenchmarkSupport

#if canImport(Glibc)
import Glibc
#endif

#if os(Linux)
/// The least an overwrite of an Int can cost in a store that several processes share, keeping
/// an in-memory index over a file mapping, with no system call: what issue 12's overwrite
/// target is to be measured against.
///
/// Per overwrite: the Int's JSON (its decimal digits) written into a 24-byte value kept inline
/// (no allocation); then, under a robust, process-shared mutex in a shared mapping (what lets
/// another process take over when a holder dies), the value set in a `[String: InlineJSON]` of
/// 1,001 keys, a record (4-byte length, 4-byte CRC slot, key, value) copied into a `MAP_SHARED`
/// mapping, its CRC-32C over the length and the rest, and the new end published with an atomic
/// release store. Nothing more: no sequence number, no version, no change announced, no flush
/// asked for, no key checked. The file's pages are faulted in before timing, and the records go
/// round it again from the start when it is full, so no page is ever new.
final class OverwriteFloor {
    /// Bytes before the first record: the mapping's first word holds the end of the last record.
    private static let headerSize = 64

    private let file: MappedFile
    private let lock: SharedMutex
    private var index: [String: InlineJSON] = [:]
    private var end = OverwriteFloor.headerSize

    /// A floor whose index holds `keys` and whose file holds `capacity` bytes.
    init(keys: [String], capacity: Int) throws {
        file = try MappedFile(label: "overwrite-floor", size: capacity)
        file.faultIn()
        lock = try SharedMutex(label: "overwrite-floor-lock")
        index.reserveCapacity(keys.count)
        for (number, key) in keys.enumerated() { index[key] = InlineJSON(number) }
    }

    @inline(__always)
    func overwrite(_ value: Int, forKey key: String) {
        let json = InlineJSON(value)
        pthread_mutex_lock(lock.mutex)
        index[key] = json
        var keyText = key
        keyText.withUTF8 { keyBytes in
            withUnsafeBytes(of: json.digits) { digits in
                let length = 8 + keyBytes.count + Int(json.count)
                if end + length > file.size { end = Self.headerSize }
                let record = file.base + end
                record.storeBytes(of: UInt32(length - 8).littleEndian, as: UInt32.self)
                (record + 8).copyMemory(from: keyBytes.baseAddress!, byteCount: keyBytes.count)
                (record + 8 + keyBytes.count).copyMemory(from: digits.baseAddress!, byteCount: Int(json.count))
                let crc = bench_crc32c(bench_crc32c(0, record, 4), record + 8, length - 8)
                (record + 4).storeBytes(of: crc.littleEndian, as: UInt32.self)
                end += length
            }
        }
        bench_store_release(file.base.assumingMemoryBound(to: UInt64.self), UInt64(end))
        pthread_mutex_unlock(lock.mutex)
    }

    func dispose() {
        lock.dispose()
        file.dispose()
    }
}

/// An Int's JSON, its decimal digits and sign, in 24 bytes kept inline: up to 20 are used.
struct InlineJSON {
    var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
    var count: UInt8 = 0

    @inline(__always)
    init(_ value: Int) {
        var count = value < 0 ? 2 : 1
        var rest = value.magnitude
        while rest >= 10 {
            count += 1
            rest /= 10
        }
        self.count = UInt8(count)
        rest = value.magnitude
        withUnsafeMutableBytes(of: &digits) { raw in
            var position = count
            repeat {
                position -= 1
                raw[position] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest != 0
            if value < 0 { raw[0] = UInt8(ascii: "-") }
        }
    }
}
#endif
