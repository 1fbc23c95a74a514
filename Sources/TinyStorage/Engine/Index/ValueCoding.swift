import CTinyStorageShims
package import Foundation

/// How a stored value's bytes are read back.
package enum ValueKind: Sendable, Hashable {
    /// JSON, as `JSONEncoder` (or a fast path producing the same bytes) wrote it.
    case json
    /// A `Data` value, stored as its raw bytes, as the original library stores `Data`.
    case data
    /// Bytes whose meaning is not recorded: a value adopted from the original library's plist
    /// (raw `Data` or JSON) or read from a version 1 file (JSON, where `Data` was a base64 string).
    case original
}

/// One stored value: its bytes, how to read them, and when it expires.
package struct StoredValue: Sendable, Hashable {
    /// The bytes, as the engine holds them.
    package var storage: ValueBytes
    package var kind: ValueKind
    /// When the value stops being readable; `nil`: never. Part of the value: storing the same
    /// bytes with another deadline is a change.
    package var deadline: Deadline?

    /// The bytes as `Data` (copied unless they are held as `Data`), for the paths that want one.
    package var bytes: Data {
        get { storage.data }
        set { storage = ValueBytes(newValue) }
    }

    package init(_ bytes: Data, kind: ValueKind, deadline: Deadline? = nil) {
        self.storage = ValueBytes(bytes)
        self.kind = kind
        self.deadline = deadline
    }

    package init(_ storage: ValueBytes, kind: ValueKind, deadline: Deadline? = nil) {
        self.storage = storage
        self.kind = kind
        self.deadline = deadline
    }

    /// Whether the value has expired at `now` (milliseconds since 1970).
    @inline(__always)
    func hasExpired(at now: UInt64) -> Bool {
        deadline?.hasPassed(at: now) ?? false
    }
}

/// Turns values into the bytes the log stores, and back.
///
/// A `Data` value is stored as its raw bytes (kind ``ValueKind/data``), as the original library
/// does; every other value as JSON. `Int`, `Bool`, `String` and `Double` take hand-written paths
/// that produce the same JSON a `JSONDecoder` reads, several times faster than `JSONEncoder`;
/// everything else goes through `JSONEncoder` with sorted keys, so equal values always encode to
/// equal bytes (which is how no-op writes are detected).
enum ValueCoding {
    /// Encodes `value`, or returns `nil` when it is `nil` (an optional holding `nil`, at any depth):
    /// the caller removes the key then.
    ///
    /// NB: the commit path's entry. `Int`, `String`, `Bool`, `Double` and `Data` are recognized
    /// first by comparing type metadata, which costs nanoseconds; only other types pay for the
    /// dynamic casts that look inside an `Optional`. Generic, so a caller's `any Encodable` is
    /// opened where it lies, once, and not copied for the comparisons.
    static func encodeUnlessNil<T: Encodable>(_ value: T, forKey key: String) throws(TinyStorageError) -> StoredValue? {
        // NB: an `Int`'s JSON is at most 20 bytes, so it needs none of `encode(opened:)`'s checks;
        // skipping that call took a seventh off this function's instructions.
        if T.self == Int.self { return StoredValue(encodeInt(unsafeBitCast(value, to: Int.self)), kind: .json) }
        if T.self == String.self || T.self == Bool.self || T.self == Double.self
            || T.self == Data.self
        {
            return try encode(opened: value, forKey: key)
        }
        if TinyStorage.isNil(value) { return nil }
        return try encode(value, forKey: key)
    }

    /// Encodes `value`; an `Optional` is encoded as what it wraps (callers remove the key for `nil`).
    static func encode(_ value: any Encodable, forKey key: String) throws(TinyStorageError) -> StoredValue {
        if let optional = value as? any OptionalValue, let wrapped = optional.wrappedAny as? any Encodable {
            return try encode(wrapped, forKey: key)
        }
        return try encode(opened: value, forKey: key)
    }

    /// NB: generic so the fast paths cost a metadata comparison each (`T.self == Int.self`), not a
    /// failed dynamic cast from `any Encodable` each; once the type is known to match, the value
    /// is reinterpreted as that type (`unsafeBitCast`, a no-op), not cast.
    static func encode<T: Encodable>(opened value: T, forKey key: String) throws(TinyStorageError) -> StoredValue {
        let stored: StoredValue
        if T.self == Int.self {
            stored = StoredValue(encodeInt(unsafeBitCast(value, to: Int.self)), kind: .json)
        } else if T.self == String.self {
            stored = StoredValue(encodeString(unsafeBitCast(value, to: String.self)), kind: .json)
        } else if T.self == Bool.self {
            stored = StoredValue(utf8Bytes(unsafeBitCast(value, to: Bool.self) ? "true" : "false"), kind: .json)
        } else if T.self == Double.self, unsafeBitCast(value, to: Double.self).isFinite {
            stored = StoredValue(utf8Bytes(unsafeBitCast(value, to: Double.self).description), kind: .json)
        } else if T.self == Data.self {
            stored = StoredValue(ValueBytes(unsafeBitCast(value, to: Data.self)), kind: .data)
        } else {
            do {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                stored = StoredValue(ValueBytes(try encoder.encode(value)), kind: .json)
            } catch {
                throw TinyStorageError(
                    .encodingFailed,
                    "The value of type \(T.self) could not be encoded as JSON (a non-finite number, "
                        + "or an `encode(to:)` that threw). Nothing was written.",
                    key: key, underlying: error)
            }
        }
        guard stored.storage.count <= TinyStorage.maximumValueSize else {
            throw TinyStorageError(
                .valueTooLarge,
                "The encoded value is \(stored.storage.count) bytes; the limit is \(TinyStorage.maximumValueSize). "
                    + "Store large blobs in their own files and keep their names here. Nothing was written.",
                key: key)
        }
        return stored
    }

    /// Decodes a stored value as `T`.
    ///
    /// Read as `Data`: a ``ValueKind/data`` value is its bytes; an ``ValueKind/original`` one is
    /// its bytes too, unless they are a JSON string holding base64 (how version 1 of our format
    /// stored `Data`), which is decoded; a ``ValueKind/json`` one is decoded by `JSONDecoder`.
    /// Read as any other type, the bytes are JSON whatever the kind, as the original library reads them.
    static func decode<T: Decodable>(
        _ type: T.Type, from stored: StoredValue, forKey key: String
    ) throws(TinyStorageError) -> T {
        if T.self == Data.self || T.self == Data?.self, stored.kind != .json {
            let bytes = stored.kind == .data ? stored.bytes : originalData(stored.bytes)
            if let value = bytes as? T { return value }
        }
        // NB: the fast paths read the bytes where they lie; only `JSONDecoder` needs a `Data`.
        if isSimple(T.self), let value = stored.storage.withUnsafeBytes({ decodeSimple(T.self, from: $0) }) {
            return value
        }
        return try decodeWithDecoder(type, from: stored.bytes, forKey: key)
    }

    /// Decodes JSON bytes as `T`.
    static func decode<T: Decodable>(_ type: T.Type, from data: Data, forKey key: String) throws(TinyStorageError) -> T
    {
        if isSimple(T.self), let value = data.withUnsafeBytes({ decodeSimple(T.self, from: $0) }) { return value }
        return try decodeWithDecoder(type, from: data, forKey: key)
    }

    /// Whether `T` has a fast path in ``decodeSimple(_:from:)``.
    @inline(__always)
    private static func isSimple<T>(_: T.Type) -> Bool {
        T.self == Int.self || T.self == Bool.self || T.self == String.self
    }

    /// `raw` decoded as an `Int`, `Bool` or `String` by hand, or `nil` when `T` is none of them or
    /// the JSON is not of the plain shape the fast paths read (then `JSONDecoder` decides).
    private static func decodeSimple<T>(_: T.Type, from raw: UnsafeRawBufferPointer) -> T? {
        if T.self == Int.self, let int = decodeInt(raw) { return int as? T }
        if T.self == Bool.self, let bool = decodeBool(raw) { return bool as? T }
        if T.self == String.self, let string = decodeSimpleString(raw) { return string as? T }
        return nil
    }

    /// Decodes JSON bytes as `T` with `JSONDecoder`.
    private static func decodeWithDecoder<T: Decodable>(
        _ type: T.Type, from data: Data, forKey key: String
    ) throws(TinyStorageError) -> T {
        do {
            return try JSONDecoder().decode(T.self, from: data)
        } catch {
            throw TinyStorageError(
                .decodingFailed,
                "The stored value could not be decoded as \(T.self). It was left untouched; read it "
                    + "with the type it was stored as, or overwrite it.",
                key: key, underlying: error)
        }
    }

    /// The `Data` an original value stands for: a JSON string of base64 is what `JSONEncoder`
    /// made of a `Data` (version 1 of our format); anything else is raw bytes (the original library).
    static func originalData(_ bytes: Data) -> Data {
        guard bytes.first == UInt8(ascii: "\""), bytes.last == UInt8(ascii: "\""), bytes.count >= 2,
            let text = try? JSONDecoder().decode(String.self, from: bytes),
            let decoded = Data(base64Encoded: text)
        else { return bytes }
        return decoded
    }

    // MARK: Fast paths

    /// An `Int`'s JSON: its decimal digits, as `String(value)` spells them.
    ///
    /// NB: the digits are counted first, then written from the last backwards, sign included,
    /// straight into the ``ValueBytes``'s own memory, which keeps up to 14 bytes inline: no
    /// `String` is made, nothing is allocated (but for 15 digits or more), and nothing is copied.
    /// Written into a buffer on the stack and copied from there, as before, an overwrite spent
    /// about 150 instructions here. `Data`'s `Sequence` initializer, used before that, cost half
    /// as much again as a copy, and a sign inserted afterwards moved every digit once more.
    static func encodeInt(_ value: Int) -> ValueBytes {
        let magnitude = value.magnitude
        // NB: at most 19 digits (`Int.min`'s magnitude is below 10^19), so `limit` cannot overflow.
        var digits = 1
        var limit: UInt64 = 10
        while digits < 19, UInt64(magnitude) >= limit {
            digits += 1
            limit &*= 10
        }
        let count = value < 0 ? digits + 1 : digits
        return ValueBytes(count: count) { raw in
            var rest = magnitude
            var index = count
            repeat {
                index -= 1
                raw[index] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest != 0
            if value < 0 { raw[0] = UInt8(ascii: "-") }
        }
    }

    /// `string`'s UTF-8 bytes, copied from its storage: `Data(string.utf8)` would first look,
    /// with a dynamic cast, for a contiguous buffer the view does not advertise.
    private static func utf8Bytes(_ string: String) -> ValueBytes {
        var string = string
        return string.withUTF8 { ValueBytes(copying: UnsafeRawBufferPointer($0)) }
    }

    /// Whether `utf8` holds a byte JSON escapes in a string: a control character (below 0x20),
    /// a quote or a backslash.
    ///
    /// NB: in C (`escape.c`): sixteen bytes at a time with SSE2 on x86-64, a third of the
    /// instructions of the word-at-a-time scan this was in Swift (343 for a 111-byte string, a
    /// fifteenth of its insert), which remains the path elsewhere. Swift's `SIMD16` compares
    /// were ten times slower than the word scan here (not vectorized).
    @inline(__always)
    static func needsEscaping(_ utf8: UnsafeRawBufferPointer) -> Bool {
        guard let base = utf8.baseAddress else { return false }
        return ts_json_needs_escape(base, utf8.count)
    }

    private static func encodeString(_ string: String) -> ValueBytes {
        // NB: most strings need no escape: their JSON is their bytes in quotes, written straight
        // into the value's memory (inline up to 12 bytes of UTF-8, else one allocation, not
        // zero-filled first). Read where they lie (native strings are contiguous UTF-8):
        // `withUTF8` needs a `var`, and copying the string into one retained and released it.
        let plain = string.utf8.withContiguousStorageIfAvailable { utf8 -> ValueBytes? in
            guard !needsEscaping(UnsafeRawBufferPointer(utf8)) else { return nil }
            let count = utf8.count + 2
            return ValueBytes(count: count) { raw in
                raw[0] = UInt8(ascii: "\"")
                UnsafeMutableRawBufferPointer(rebasing: raw[1..<count - 1])
                    .copyMemory(from: UnsafeRawBufferPointer(utf8))
                raw[count - 1] = UInt8(ascii: "\"")
            }
        }
        // NB: `nil` outside: the string's bytes are not contiguous (bridged); inside: they need escaping.
        if case let plain?? = plain { return plain }
        var bytes = [UInt8]()
        bytes.reserveCapacity(string.utf8.count + 2)
        bytes.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: bytes.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [
                    0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)],
                ])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
        return ValueBytes(bytes)
    }

    /// Parses `-?[0-9]+` without overflow; anything else (spaces, exponents) goes to `JSONDecoder`.
    private static func decodeInt(_ raw: UnsafeRawBufferPointer) -> Int? {
        do {
            guard !raw.isEmpty, raw.count <= 20 else { return nil }
            var index = 0
            let negative = raw[0] == UInt8(ascii: "-")
            if negative { index = 1 }
            guard index < raw.count else { return nil }
            var value = 0
            while index < raw.count {
                let digit = Int(raw[index]) - 48
                guard (0...9).contains(digit) else { return nil }
                let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
                let (next, overflow2) =
                    negative ? times.subtractingReportingOverflow(digit) : times.addingReportingOverflow(digit)
                guard !overflow1, !overflow2 else { return nil }
                value = next
                index += 1
            }
            return value
        }
    }

    private static func decodeBool(_ raw: UnsafeRawBufferPointer) -> Bool? {
        if raw.elementsEqual("true".utf8) { return true }
        if raw.elementsEqual("false".utf8) { return false }
        return nil
    }

    /// Strings with no escapes, which is most of them; the rest go to `JSONDecoder`.
    private static func decodeSimpleString(_ raw: UnsafeRawBufferPointer) -> String? {
        do {
            guard raw.count >= 2, raw.first == 0x22, raw.last == 0x22 else { return nil }
            let inner = UnsafeRawBufferPointer(rebasing: raw[1..<raw.count - 1])
            guard !inner.contains(where: { $0 == 0x5C || $0 == 0x22 || $0 < 0x20 }) else { return nil }
            return String(decoding: inner, as: UTF8.self)
        }
    }
}
