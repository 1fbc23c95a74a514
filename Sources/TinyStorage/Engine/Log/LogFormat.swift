import Foundation

/// The bytes of a store's data file. This library writes format versions 2 and 3 and reads 1, 2 and 3.
///
/// ```text
/// file      = header record* zero-fill?
///
/// header v2 = magic(8) version(u32 = 2) flags(u32 = 0) generation(u64) baseSequence(u64)
///             snapshotRecords(u32) crc(u32)                     -- crc over bytes 0..<36
///             durableMark slot A (bytes 40..<52), slot B (52..<64): end(u64) crc(u32) each
///                                                               -- 64 bytes in all
/// record    = length(u32) crc(u32) payload(length bytes)
///             crc = CRC-32C over the 4 length bytes followed by the payload
/// payload   = kind(u8 = 2) flags(u8: 1 = clear all first, 4 = has writeID) sequence(u64)
///             [writeIDLength(u16) writeID(UTF-8)] count(u32) operation*
/// operation = tag(u8) keyLength(u32) key(UTF-8) [valueLength(u32) value]
///             tag: 1 = put JSON, 2 = remove, 3 = put Data (its raw bytes),
///                  4 = put original (bytes adopted from the original library's plist or read
///                      from a version 1 file: raw `Data` or JSON, not known which)
///
/// header v3 = the v2 header with version(u32 = 3)
/// operation = as in v2, and one more tag:
///   (v3)      tag(u8 = 5) keyLength(u32) key(UTF-8) deadline(u64) valueTag(u8: 1, 3 or 4)
///             valueLength(u32) value                            -- a put that expires
///             deadline = milliseconds since 1970-01-01 00:00 UTC (wall clock), at least 1
///
/// header v1 = magic(8) version(u32 = 1) flags(u32) generation(u64) reserved(u32) crc(u32)
///                                                               -- crc over bytes 0..<28, 32 bytes
/// payload   = kind(u8 = 1) flags(u8: 1 = clear all first, 2 = has writeID) writeID(16, a UUID)?
///   (v1)      count(u32) operation*, with tags 1 = put (an original value), 2 = remove
/// ```
///
/// All integers are little-endian. A record is one commit, so a commit is all-or-nothing: a
/// record that is incomplete or fails its checksum is not applied. A length of zero marks the
/// end of the log (space preallocated with zeros for durable commits).
///
/// **Where the log ends is decided by this file alone**: after the last record that verifies and
/// continues the sequence. The lock file's page (``CoordinationFile``) says where to look and
/// saves a scan, never more: records past the length it publishes are read (and the next record
/// appended after them), bytes it says were committed that do not verify have the file checked
/// from its start, and only the header's durable mark tells lost flushed data (reported as
/// damage) from the power-loss window (cut, and set aside). Each record's `sequence`
/// is the previous record's plus one; the first follows the header's `baseSequence`. A file
/// written by a compaction or a repair starts with `snapshotRecords` records, one put per key,
/// then the commits it copied from the file it replaced (see ``LogHeader/snapshotRecords``). The header's
/// checksum does not cover the durable-mark slots, which are updated in place. Versions after 2
/// keep the fixed part of the v2 header, so a newer file is recognized as such, never as damage.
///
/// **Version 3 exists for values that expire.** Its records are version 2's (kind 2), and may
/// also hold tag 5, a put with a deadline. A file is version 3 only once it holds such a put: a
/// store that never stores an expiring value stays version 2, readable by every release that
/// reads version 2. The first commit that puts an expiring value into a version 2 file first
/// rewrites it as version 3 (a compaction), then appends. A compaction keeps a version 3 file
/// version 3 (the commits it copies from the old file's tail are copied as they are); a repair or
/// a backup, which write their file whole, write version 2 when no value left in it expires
/// (expired values are left out of every file written whole). A release that knows only version
/// 2 finds a valid header of a newer version and refuses the file (`unsupportedFormat`), leaving
/// it untouched: never damage, never a quarantine. A tag 5 in a version 2 file is a malformed
/// record.
///
/// A v1 file is read as it is for as long as it is only read; the first commit to it rewrites it
/// as v2 (as a compaction does) before appending, so a file never mixes versions.
package enum LogFormat {
    static let magic: [UInt8] = [0x89, 0x54, 0x49, 0x4E, 0x59, 0x4B, 0x56, 0x0A]  // "\x89TINYKV\n"
    /// The version this library writes files in, unless they hold a value that expires.
    static let version: UInt32 = 2
    /// The version of files that hold a value that expires (a put with a deadline, tag 5).
    static let expiringVersion: UInt32 = 3
    /// The newest version this library reads.
    static let newestVersion: UInt32 = expiringVersion
    /// The size of a header this library writes (version 2).
    static let headerSize = 64
    /// The size of a version 1 header, the smallest there is.
    static let minimumHeaderSize = 32
    static let frameSize = 8
    /// Where a version 2 payload holds its sequence number (after its kind and flags).
    static let sequenceOffset = 2
    /// Larger lengths are treated as damage, never allocated.
    static let maximumPayloadSize = 512 << 20
    /// The longest writeID a record holds, in bytes of UTF-8 (`TinyStorage.maximumWriteIDLength`).
    static let maximumWriteIDLength = 1024

    /// A record's first payload byte: its format version.
    static let commitKind: UInt8 = 2
    static let version1CommitKind: UInt8 = 1
    static let clearFlag: UInt8 = 1
    static let version1WriteIDFlag: UInt8 = 2
    static let writeIDFlag: UInt8 = 4

    static let putJSONTag: UInt8 = 1
    static let removeTag: UInt8 = 2
    static let putDataTag: UInt8 = 3
    static let putOriginalTag: UInt8 = 4
    /// A put with a deadline (version 3): the key, the deadline, then the value's own tag (1, 3
    /// or 4), length and bytes.
    static let putExpiringTag: UInt8 = 5
    /// The size of what an expiring put adds to a put: the deadline and the value's own tag.
    static let deadlineFieldsSize = 9

    /// The header's size in a file of `version`.
    static func headerSize(version: UInt32) -> Int {
        version == 1 ? minimumHeaderSize : headerSize
    }

    /// Where the records' frames in a data file's `bytes` end, checksums unchecked: after the
    /// header, each frame's length leads to the next, up to a length of zero (space allocated
    /// ahead, see ``AppendMapping``) or one reaching past the end. On Linux a data file goes on
    /// past its log, so its size says nothing about where records end; tools and tests use this.
    package static func framesEnd(of bytes: [UInt8]) -> Int {
        guard bytes.count >= 12 else { return bytes.count }
        let fileVersion = bytes.withUnsafeBytes { $0.loadLittleEndian(UInt32.self, at: 8) }
        var position = min(headerSize(version: fileVersion), bytes.count)
        while position + frameSize <= bytes.count {
            guard let length = Self.length(bytes.withUnsafeBytes { $0.loadLittleEndian(UInt32.self, at: position) }),
                length > 0, length <= bytes.count - position - frameSize
            else { break }
            position += frameSize + length
        }
        return position
    }

    /// A length or count read from a file, as an `Int`; `nil` when it does not fit one. Every
    /// such number goes through here before it is used: on watchOS (arm64_32) an `Int` has 32
    /// bits, and `Int(_:)` of a larger number traps, where a damaged length must be damage.
    static func length<Stated: BinaryInteger>(_ stated: Stated) -> Int? { Int(exactly: stated) }

    /// The record kind of a file of `version`, or `nil` (any known kind) when the version is unknown.
    static func recordKind(version: UInt32?) -> UInt8? {
        version.map { $0 == 1 ? version1CommitKind : commitKind }
    }

    /// Whether records of a file of `version` (`nil`: unknown, any) may hold puts with a deadline.
    static func allowsDeadlines(version: UInt32?) -> Bool {
        version.map { $0 >= expiringVersion } ?? true
    }

    /// The kind of value a put's tag (its own, or the one inside an expiring put) stands for.
    static func valueKind(tag: UInt8) -> ValueKind? {
        switch tag {
        case putJSONTag: .json
        case putDataTag: .data
        case putOriginalTag: .original
        default: nil
        }
    }

    static func tag(for kind: ValueKind) -> UInt8 {
        switch kind {
        case .json: putJSONTag
        case .data: putDataTag
        case .original: putOriginalTag
        }
    }
}

/// The decoded file header.
struct LogHeader: Equatable, Sendable {
    var version: UInt32 = LogFormat.version
    var generation: UInt64
    /// The sequence number the file's first record follows (always 0 in version 1).
    var baseSequence: UInt64 = 0
    /// How many records at the start of the file are a snapshot of the file it replaced (one put
    /// per key, written by a compaction or a repair) rather than commits. The commits after them
    /// continue the replaced file's numbering shifted by this count, so a process that read the
    /// replaced file to its end can tell which of them it has applied already. 0 in files written
    /// before this field existed (the bytes were reserved and zero).
    var snapshotRecords: UInt32 = 0

    /// The header's size in bytes; records start right after it.
    var size: Int { LogFormat.headerSize(version: version) }

    enum Problem: Error, Equatable {
        /// Fewer bytes than the header needs.
        case truncated
        /// The first bytes are not TinyStorage's magic: this is not a store file.
        case notAStoreFile
        /// The magic is ours but the header's checksum fails.
        case damaged
        /// Written by a newer format this version cannot read.
        case newerVersion(UInt32)
    }

    /// The header's bytes: the version 1 layout for `version` 1 (kept for tests of old files),
    /// otherwise the version 2 layout (which version 3 keeps) with both durable-mark slots zero.
    func encoded() -> [UInt8] {
        var bytes = LogFormat.magic
        bytes.reserveCapacity(size)
        bytes.appendLittleEndian(version)
        bytes.appendLittleEndian(UInt32(0))
        bytes.appendLittleEndian(generation)
        if version != 1 { bytes.appendLittleEndian(baseSequence) }
        bytes.appendLittleEndian(version != 1 ? snapshotRecords : 0)
        let crc = bytes.withUnsafeBytes { crc32c($0) }
        bytes.appendLittleEndian(crc)
        bytes.append(contentsOf: repeatElement(0, count: size - bytes.count))
        return bytes
    }

    // MARK: The durable mark

    /// The offset of the durable-mark slots in a version 2 header.
    static let durableSlotsOffset = 40
    static let durableSlotSize = 12
    /// The header bytes the two slots occupy.
    static var durableSlotsRange: Range<Int> { durableSlotsOffset..<durableSlotsOffset + 2 * durableSlotSize }

    /// How far the file is known to be on stable storage: the larger end of the two slots whose
    /// checksum holds, or 0 (version 1 files, or no flush recorded yet).
    ///
    /// Each flush writes the end it reached into the slot holding the smaller value, after the
    /// flush returned, so the mark never claims more than what is durable (it lags by one flush),
    /// and a slot torn by a crash leaves the other one.
    static func durableMark(in bytes: UnsafeRawBufferPointer) -> Int {
        guard bytes.count >= LogFormat.headerSize, bytes.loadLittleEndian(UInt32.self, at: 8) >= 2 else { return 0 }
        return max(slotValue(in: bytes, slot: 0) ?? 0, slotValue(in: bytes, slot: 1) ?? 0)
    }

    /// The end held by `slot` (0 or 1), or `nil` when its checksum fails.
    static func slotValue(in bytes: UnsafeRawBufferPointer, slot: Int) -> Int? {
        let offset = durableSlotsOffset + slot * durableSlotSize
        guard bytes.count >= offset + durableSlotSize else { return nil }
        let end = bytes.loadLittleEndian(UInt64.self, at: offset)
        let stored = bytes.loadLittleEndian(UInt32.self, at: offset + 8)
        guard crc32c(UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + 8])) == stored, end > 0 else {
            return nil
        }
        return LogFormat.length(end)
    }

    /// The 12 bytes of a slot holding `end`: the end, then a CRC-32C over it.
    static func slotBytes(end: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.appendLittleEndian(UInt64(end))
        let crc = bytes.withUnsafeBytes { crc32c($0) }
        bytes.appendLittleEndian(crc)
        return bytes
    }

    /// Sets slot A of the version 2 header at the start of `bytes` to `end` (a new file, flushed
    /// whole before it is put in place).
    static func setDurableMark(_ end: Int, in bytes: inout [UInt8]) {
        guard bytes.count >= LogFormat.headerSize else { return }
        bytes.replaceSubrange(durableSlotsOffset..<durableSlotsOffset + durableSlotSize, with: slotBytes(end: end))
    }

    /// Decodes a header.
    ///
    /// - Parameter newestReadable: The newest version to accept: a valid header of a later one
    ///   is ``Problem/newerVersion(_:)``. Tests pass 2 to read files as a release that knows only
    ///   version 2 does.
    static func decode(
        _ bytes: UnsafeRawBufferPointer, newestReadable: UInt32 = LogFormat.newestVersion
    ) -> Result<LogHeader, Problem> {
        guard bytes.count >= LogFormat.minimumHeaderSize else { return .failure(.truncated) }
        guard bytes.prefix(8).elementsEqual(LogFormat.magic) else { return .failure(.notAStoreFile) }
        let version = bytes.loadLittleEndian(UInt32.self, at: 8)
        let generation = bytes.loadLittleEndian(UInt64.self, at: 16)
        func checksumHolds(over count: Int) -> Bool {
            crc32c(UnsafeRawBufferPointer(rebasing: bytes[0..<count])) == bytes.loadLittleEndian(UInt32.self, at: count)
        }
        if version == 1 {
            guard checksumHolds(over: 28) else { return .failure(.damaged) }
            return .success(LogHeader(version: 1, generation: generation))
        }
        // NB: a flipped bit in the version field fails the checksum too, so damage to a v1 or v2
        // header is never mistaken for a newer version.
        guard bytes.count >= LogFormat.headerSize else { return .failure(.truncated) }
        guard version >= 2, checksumHolds(over: 36) else { return .failure(.damaged) }
        guard version <= newestReadable else { return .failure(.newerVersion(version)) }
        return .success(
            LogHeader(
                version: version, generation: generation, baseSequence: bytes.loadLittleEndian(UInt64.self, at: 24),
                snapshotRecords: bytes.loadLittleEndian(UInt32.self, at: 32)))
    }
}

/// One change inside a commit.
enum LogOperation: Equatable, Sendable {
    /// A put; with a `deadline`, one that expires (format version 3).
    case put(key: String, value: Data, kind: ValueKind = .json, deadline: Deadline? = nil)
    case remove(key: String)

    var key: String {
        switch self {
        case .put(let key, _, _, _), .remove(let key): key
        }
    }

    /// A put of `value` (its bytes, kind and deadline) for `key`, or a removal when it is `nil`.
    static func setting(_ key: String, to value: StoredValue?) -> Self {
        guard let value else { return .remove(key: key) }
        return .put(key: key, value: value.bytes, kind: value.kind, deadline: value.deadline)
    }
}

/// One record: the unit of atomicity.
struct LogCommit: Equatable, Sendable {
    var clearsFirst = false
    /// The writer's tag, handed to observers (at most ``LogFormat/maximumWriteIDLength`` bytes).
    var writeID: String?
    /// The record's place in the commit order (version 1 records have none: 0). Set by the engine
    /// when it appends.
    var sequence: UInt64 = 0
    var operations: SmallList<LogOperation>

    /// The size of the record, frame included.
    var encodedSize: Int {
        var operationsSize = 0
        for index in operations.indices {
            switch operations[index] {
            case .put(let key, let value, _, let deadline):
                operationsSize += RecordWriter.operationSize(
                    keyLength: key.utf8.count, valueLength: value.count, expires: deadline != nil)
            case .remove(let key):
                operationsSize += RecordWriter.operationSize(keyLength: key.utf8.count, valueLength: nil)
            }
        }
        return RecordWriter.recordSize(writeID: writeID, operationsSize: operationsSize)
    }

    /// Writes the record's bytes, frame included, into `raw`, which must be exactly
    /// ``encodedSize`` bytes (the caller has just computed it to find room for them).
    ///
    /// NB: the commit path's hot spot, so it writes into memory directly (a reused buffer, or a
    /// mapping of the file).
    func write(into raw: UnsafeMutableRawBufferPointer) {
        var writer = RecordWriter(
            into: raw, clearsFirst: clearsFirst, writeID: writeID, sequence: sequence,
            operationCount: operations.count)
        // NB: by index: iterating a SmallList copies it (its element and its array).
        for index in operations.indices {
            switch operations[index] {
            case .put(let key, let value, let kind, let deadline):
                writer.put(key: key, value: value, kind: kind, deadline: deadline)
            case .remove(let key): writer.remove(key: key)
            }
        }
        writer.finish()
    }

    /// Appends the record's bytes, frame included, to `bytes`.
    func encode(into bytes: inout [UInt8]) {
        let start = bytes.count
        let end = start + encodedSize
        // NB: grown geometrically, as appending does: reserving exactly what one more record
        // needs made every call copy the whole buffer, so encoding many records into one (a
        // compaction's file, the commits it copies) took time quadratic in their number.
        if bytes.capacity < end { bytes.reserveCapacity(max(end, 2 * bytes.capacity)) }
        // NB: room made, then written in place by the record writer, which alone knows the layout.
        bytes.append(contentsOf: repeatElement(0, count: end - start))
        bytes.withUnsafeMutableBytes { write(into: UnsafeMutableRawBufferPointer(rebasing: $0[start..<end])) }
    }

    /// The format version a file must have to hold this commit: 3 when it puts a value that
    /// expires, otherwise 2.
    var requiredVersion: UInt32 {
        for index in operations.indices {
            if case .put(_, _, _, .some) = operations[index] { return LogFormat.expiringVersion }
        }
        return LogFormat.version
    }

    /// The encoded size of one `put` record holding `key` and `value` (with a deadline when
    /// `expires`): what a compacted file spends per live entry.
    static func putRecordSize(keyLength: Int, valueLength: Int, expires: Bool = false) -> Int {
        RecordWriter.recordSize(
            writeID: nil,
            operationsSize: RecordWriter.operationSize(keyLength: keyLength, valueLength: valueLength, expires: expires)
        )
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
