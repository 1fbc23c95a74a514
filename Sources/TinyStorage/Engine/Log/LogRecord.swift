import Foundation

/// A record the engine can append: sized first, to find room for it, then written in place.
protocol LogRecord {
    /// The size of the record, frame included.
    var encodedSize: Int { get }
    /// Writes the record into `raw`, exactly ``encodedSize`` bytes.
    func write(into raw: UnsafeMutableRawBufferPointer)
}

extension LogRecord {
    /// The record's bytes, frame included, ready to append (always the current format).
    func encoded() -> [UInt8] {
        let total = encodedSize
        return [UInt8](unsafeUninitializedCapacity: total) { buffer, initialized in
            write(into: UnsafeMutableRawBufferPointer(buffer))
            initialized = total
        }
    }
}

extension LogCommit: LogRecord {}

/// The record of one key set or removed (see ``Engine/commitSingleKey(_:forKey:writeID:)``):
/// the bytes of a ``LogCommit`` of that one operation, written without building one.
struct SingleKeyRecord: LogRecord {
    var key: String
    /// `nil`: the key is removed.
    var value: StoredValue?
    var writeID: String?
    var sequence: UInt64

    var encodedSize: Int {
        RecordWriter.recordSize(
            writeID: writeID,
            operationsSize: RecordWriter.operationSize(
                keyLength: key.utf8.count, valueLength: value?.storage.count, expires: value?.deadline != nil))
    }

    func write(into raw: UnsafeMutableRawBufferPointer) {
        var writer = RecordWriter(
            into: raw, clearsFirst: false, writeID: writeID, sequence: sequence, operationCount: 1)
        // NB: the optional is matched through, not unwrapped (see `put(key:value:kind:)`).
        switch value?.kind {
        case let kind?: writer.put(key: key, value: value, kind: kind)
        case nil: writer.remove(key: key)
        }
        writer.finish()
    }
}

/// Writes one commit record, in the current format, into memory that is exactly its size: its
/// frame and fields, then each operation, then (``finish()``) its checksum. The one place the
/// layout of a record is written down: every record is written through it (appended commits,
/// ``SingleKeyRecord``, and ``LogCommit/encode(into:)`` for files written whole).
struct RecordWriter {
    private let raw: UnsafeMutableRawBufferPointer
    private var position = 0

    /// The size of an operation's bytes: a put's (one that `expires`: with its deadline), or a
    /// removal's when `valueLength` is `nil`.
    static func operationSize(keyLength: Int, valueLength: Int?, expires: Bool = false) -> Int {
        1 + 4 + keyLength + (valueLength.map { 4 + $0 } ?? 0) + (expires ? LogFormat.deadlineFieldsSize : 0)
    }

    /// The size of a record, frame included, whose operations take `operationsSize` bytes.
    static func recordSize(writeID: String?, operationsSize: Int) -> Int {
        LogFormat.frameSize + 2 + 8 + 4 + (writeID.map { 2 + $0.utf8.count } ?? 0) + operationsSize
    }

    /// Writes the frame (its checksum left for ``finish()``) and the fields before the operations.
    init(
        into raw: UnsafeMutableRawBufferPointer, clearsFirst: Bool, writeID: String?, sequence: UInt64,
        operationCount: Int
    ) {
        self.raw = raw
        put(UInt32(raw.count - LogFormat.frameSize))
        put(UInt32(0))  // checksum, filled in by `finish`
        put(LogFormat.commitKind)
        put((clearsFirst ? LogFormat.clearFlag : 0) | (writeID == nil ? 0 : LogFormat.writeIDFlag))
        put(sequence)
        if let writeID {
            put(UInt16(writeID.utf8.count))
            put(utf8: writeID)
        }
        put(UInt32(operationCount))
    }

    /// Writes a put of `value` (a ``LogOperation``'s), one that expires at `deadline` when given.
    mutating func put(key: String, value: Data, kind: ValueKind, deadline: Deadline?) {
        putHead(key: key, valueCount: value.count, kind: kind, deadline: deadline)
        value.withUnsafeBytes { put($0) }
    }

    /// Writes a put of the value `value` holds (not `nil`; `kind` is its kind): the same bytes as
    /// for the same value in `Data`.
    ///
    /// NB: the single-key commit's path. Takes the record's optional as it is and reads through
    /// it: unwrapped first (`if let`), the value was copied out of the record, a retain and a
    /// release of its buffer (about 80 instructions). Reading a ``ValueBytes`` in place also
    /// skips the runtime's exclusivity checks a `Data`'s storage costs.
    mutating func put(key: String, value: StoredValue?, kind: ValueKind) {
        putHead(key: key, valueCount: value?.storage.count ?? 0, kind: kind, deadline: value?.deadline)
        value?.storage.withUnsafeBytes { put($0) }
    }

    /// A put's tag, key and value length: everything before the value. A put with a deadline is
    /// tagged as expiring, and its deadline and the value's own tag follow the key.
    @inline(__always)
    private mutating func putHead(key: String, valueCount: Int, kind: ValueKind, deadline: Deadline?) {
        put(deadline == nil ? LogFormat.tag(for: kind) : LogFormat.putExpiringTag)
        put(UInt32(key.utf8.count))
        put(utf8: key)
        if let deadline {
            put(deadline.milliseconds)
            put(LogFormat.tag(for: kind))
        }
        put(UInt32(valueCount))
    }

    mutating func remove(key: String) {
        put(LogFormat.removeTag)
        put(UInt32(key.utf8.count))
        put(utf8: key)
    }

    /// Fills in the checksum, over the length and the payload.
    func finish() {
        assert(position == raw.count, "a record's buffer is not its size")
        let lengthCRC = crc32c(UnsafeRawBufferPointer(rebasing: raw[0..<4]))
        let crc = crc32c(
            UnsafeRawBufferPointer(rebasing: raw[LogFormat.frameSize..<raw.count]), startingWith: lengthCRC)
        raw.storeBytes(of: crc.littleEndian, toByteOffset: 4, as: UInt32.self)
    }

    private mutating func put(_ byte: UInt8) {
        raw[position] = byte
        position += 1
    }

    private mutating func put<T: FixedWidthInteger>(_ value: T) {
        raw.storeBytes(of: value.littleEndian, toByteOffset: position, as: T.self)
        position += MemoryLayout<T>.size
    }

    private mutating func put(_ source: UnsafeRawBufferPointer) {
        guard let base = source.baseAddress, let start = raw.baseAddress, !source.isEmpty else { return }
        (start + position).copyMemory(from: base, byteCount: source.count)
        position += source.count
    }

    private mutating func put(utf8 string: String) {
        // NB: in place where the string has contiguous UTF-8 (as it does unless bridged); a
        // copy of a key cost an overwrite 250 instructions, a byte-by-byte loop more.
        let written: Void? = string.utf8.withContiguousStorageIfAvailable { put(UnsafeRawBufferPointer($0)) }
        if written == nil { for byte in string.utf8 { put(byte) } }
    }
}
