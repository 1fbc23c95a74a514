import Foundation

/// The bytes of a store's data file (format version 1).
///
/// ```text
/// file    = header record* zero-fill?
/// header  = magic(8) version(u32) flags(u32) generation(u64) reserved(u32) crc(u32)   -- 32 bytes
/// record  = length(u32) crc(u32) payload(length bytes)
///           crc = CRC-32C over the 4 length bytes followed by the payload
/// payload = kind(u8 = 1) flags(u8: 1 = clear all first, 2 = has writeID) writeID(16)?
///           count(u32) operation*
/// operation = tag(u8: 1 put, 2 remove) keyLength(u32) key(UTF-8) [valueLength(u32) value]
/// ```
///
/// All integers are little-endian. A record is one commit, so a commit is all-or-nothing: a
/// record that is incomplete or fails its checksum is not applied. A length of zero marks the
/// end of the log (space preallocated with zeros for durable commits).
enum LogFormat {
    static let magic: [UInt8] = [0x89, 0x54, 0x49, 0x4E, 0x59, 0x4B, 0x56, 0x0A]  // "\x89TINYKV\n"
    static let version: UInt32 = 1
    static let headerSize = 32
    static let frameSize = 8
    /// Larger lengths are treated as damage, never allocated.
    static let maximumPayloadSize = 512 << 20

    static let putTag: UInt8 = 1
    static let removeTag: UInt8 = 2
    static let commitKind: UInt8 = 1
    static let clearFlag: UInt8 = 1
    static let writeIDFlag: UInt8 = 2
}

/// The decoded file header.
struct LogHeader: Equatable, Sendable {
    var version: UInt32 = LogFormat.version
    var generation: UInt64

    enum Problem: Error, Equatable {
        /// Fewer than 32 bytes.
        case truncated
        /// The first bytes are not TinyStorage's magic: this is not a store file.
        case notAStoreFile
        /// The magic is ours but the header's checksum fails.
        case damaged
        /// Written by a newer format this version cannot read.
        case newerVersion(UInt32)
    }

    func encoded() -> [UInt8] {
        var bytes = LogFormat.magic
        bytes.reserveCapacity(LogFormat.headerSize)
        bytes.appendLittleEndian(version)
        bytes.appendLittleEndian(UInt32(0))
        bytes.appendLittleEndian(generation)
        bytes.appendLittleEndian(UInt32(0))
        let crc = bytes.withUnsafeBytes { crc32c($0) }
        bytes.appendLittleEndian(crc)
        return bytes
    }

    static func decode(_ bytes: UnsafeRawBufferPointer) -> Result<LogHeader, Problem> {
        guard bytes.count >= LogFormat.headerSize else { return .failure(.truncated) }
        guard bytes.prefix(8).elementsEqual(LogFormat.magic) else { return .failure(.notAStoreFile) }
        let stored = bytes.loadLittleEndian(UInt32.self, at: 28)
        guard crc32c(UnsafeRawBufferPointer(rebasing: bytes[0..<28])) == stored else {
            return .failure(.damaged)
        }
        let version = bytes.loadLittleEndian(UInt32.self, at: 8)
        guard version <= LogFormat.version else { return .failure(.newerVersion(version)) }
        return .success(LogHeader(version: version, generation: bytes.loadLittleEndian(UInt64.self, at: 16)))
    }
}

/// One change inside a commit.
enum LogOperation: Equatable, Sendable {
    case put(key: String, value: Data)
    case remove(key: String)

    var key: String {
        switch self {
        case .put(let key, _), .remove(let key): key
        }
    }
}

/// One record: the unit of atomicity.
struct LogCommit: Equatable, Sendable {
    var clearsFirst = false
    var writeID: UUID?
    var operations: [LogOperation]

    /// The record's bytes, frame included, ready to append.
    ///
    /// NB: the commit path's hot spot, so it writes into uninitialized memory directly; it must
    /// produce exactly what ``encode(into:)`` does (the unit tests compare them).
    func encoded() -> [UInt8] {
        let total = LogFormat.frameSize + payloadSize
        return [UInt8](unsafeUninitializedCapacity: total) { buffer, initialized in
            let raw = UnsafeMutableRawBufferPointer(buffer)
            guard let start = raw.baseAddress else { return }
            var position = 0
            func put(_ byte: UInt8) {
                raw[position] = byte
                position += 1
            }
            func put(_ value: UInt32) {
                raw.storeBytes(of: value.littleEndian, toByteOffset: position, as: UInt32.self)
                position += 4
            }
            func put(_ source: UnsafeRawBufferPointer) {
                guard let base = source.baseAddress, !source.isEmpty else { return }
                (start + position).copyMemory(from: base, byteCount: source.count)
                position += source.count
            }
            func put(utf8 string: String) {
                var string = string
                string.withUTF8 { put(UnsafeRawBufferPointer($0)) }
            }
            put(UInt32(total - LogFormat.frameSize))
            put(UInt32(0))  // checksum, filled in below
            put(LogFormat.commitKind)
            put((clearsFirst ? LogFormat.clearFlag : 0) | (writeID == nil ? 0 : LogFormat.writeIDFlag))
            if let writeID { Swift.withUnsafeBytes(of: writeID.uuid) { put($0) } }
            put(UInt32(operations.count))
            for operation in operations {
                switch operation {
                case .put(let key, let value):
                    put(LogFormat.putTag)
                    put(UInt32(key.utf8.count))
                    put(utf8: key)
                    put(UInt32(value.count))
                    value.withUnsafeBytes { put($0) }
                case .remove(let key):
                    put(LogFormat.removeTag)
                    put(UInt32(key.utf8.count))
                    put(utf8: key)
                }
            }
            let lengthCRC = crc32c(UnsafeRawBufferPointer(rebasing: raw[0..<4]))
            let crc = crc32c(
                UnsafeRawBufferPointer(rebasing: raw[LogFormat.frameSize..<total]), startingWith: lengthCRC)
            raw.storeBytes(of: crc.littleEndian, toByteOffset: 4, as: UInt32.self)
            initialized = total
        }
    }

    /// The payload's size in bytes.
    var payloadSize: Int {
        var size = 2 + 4 + (writeID == nil ? 0 : 16)
        for operation in operations {
            switch operation {
            case .put(let key, let value): size += 1 + 4 + key.utf8.count + 4 + value.count
            case .remove(let key): size += 1 + 4 + key.utf8.count
            }
        }
        return size
    }

    /// Appends the record's bytes, frame included, to `bytes`.
    func encode(into bytes: inout [UInt8]) {
        let payloadSize = self.payloadSize
        let start = bytes.count
        bytes.reserveCapacity(start + LogFormat.frameSize + payloadSize)
        bytes.appendLittleEndian(UInt32(payloadSize))
        bytes.appendLittleEndian(UInt32(0))  // checksum, filled in below
        bytes.append(LogFormat.commitKind)
        bytes.append((clearsFirst ? LogFormat.clearFlag : 0) | (writeID == nil ? 0 : LogFormat.writeIDFlag))
        if let writeID {
            withUnsafeBytes(of: writeID.uuid) { bytes.append(contentsOf: $0) }
        }
        bytes.appendLittleEndian(UInt32(operations.count))
        for operation in operations {
            switch operation {
            case .put(let key, let value):
                bytes.append(LogFormat.putTag)
                bytes.appendLittleEndian(UInt32(key.utf8.count))
                bytes.append(contentsOf: key.utf8)
                bytes.appendLittleEndian(UInt32(value.count))
                bytes.append(contentsOf: value)
            case .remove(let key):
                bytes.append(LogFormat.removeTag)
                bytes.appendLittleEndian(UInt32(key.utf8.count))
                bytes.append(contentsOf: key.utf8)
            }
        }
        bytes.withUnsafeMutableBytes { raw in
            let lengthCRC = crc32c(UnsafeRawBufferPointer(rebasing: raw[start..<start + 4]))
            let payload = UnsafeRawBufferPointer(rebasing: raw[(start + LogFormat.frameSize)...])
            raw.storeBytes(
                of: crc32c(payload, startingWith: lengthCRC).littleEndian, toByteOffset: start + 4,
                as: UInt32.self)
        }
    }

    /// The encoded size of one `put` record holding `key` and `value`: what a compacted file
    /// spends per live entry.
    static func putRecordSize(keyLength: Int, valueLength: Int) -> Int {
        LogFormat.frameSize + 2 + 4 + 1 + 4 + keyLength + 4 + valueLength
    }
}

extension Array where Element == UInt8 {
    @inline(__always)
    mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }
}

extension UnsafeRawBufferPointer {
    @inline(__always)
    func loadLittleEndian<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        T(littleEndian: loadUnaligned(fromByteOffset: offset, as: T.self))
    }
}

extension Data {
    /// A copy with its own storage, indexed from 0 (stored values may be slices of a file buffer).
    func detached() -> Data {
        withUnsafeBytes { Data($0) }
    }
}
