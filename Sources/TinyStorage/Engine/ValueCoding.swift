import Foundation

/// Turns values into the JSON bytes the log stores, and back.
///
/// `Int`, `Bool`, `String` and `Double` take hand-written paths that produce the same JSON a
/// `JSONDecoder` reads, several times faster than `JSONEncoder`; everything else goes through
/// `JSONEncoder` with sorted keys, so equal values always encode to equal bytes (which is how
/// no-op writes are detected).
enum ValueCoding {
    static func encode(_ value: any Encodable, forKey key: String) throws(TinyStorageError) -> Data {
        try encode(opened: value, forKey: key)
    }

    /// NB: generic so the fast paths cost a metadata comparison each (`T.self == Int.self`), not a
    /// failed dynamic cast from `any Encodable` each.
    static func encode<T: Encodable>(opened value: T, forKey key: String) throws(TinyStorageError) -> Data {
        let data: Data
        if T.self == Int.self, let int = value as? Int {
            data = Data(String(int).utf8)
        } else if T.self == String.self, let string = value as? String {
            data = encodeString(string)
        } else if T.self == Bool.self, let bool = value as? Bool {
            data = Data((bool ? "true" : "false").utf8)
        } else if T.self == Double.self, let double = value as? Double, double.isFinite {
            data = Data(double.description.utf8)
        } else {
            do {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                data = try encoder.encode(value)
            } catch {
                throw TinyStorageError(
                    .encodingFailed,
                    "The value of type \(T.self) could not be encoded as JSON (a non-finite number, "
                        + "or an `encode(to:)` that threw). Nothing was written.",
                    key: key, underlying: error)
            }
        }
        guard data.count <= TinyStorage.maximumValueSize else {
            throw TinyStorageError(
                .valueTooLarge,
                "The encoded value is \(data.count) bytes; the limit is \(TinyStorage.maximumValueSize). "
                    + "Store large blobs in their own files and keep their names here. Nothing was written.",
                key: key)
        }
        return data
    }

    static func decode<T: Decodable>(_ type: T.Type, from data: Data, forKey key: String) throws(TinyStorageError) -> T
    {
        if T.self == Int.self, let int = decodeInt(data), let value = int as? T { return value }
        if T.self == Bool.self, let bool = decodeBool(data), let value = bool as? T { return value }
        if T.self == String.self, let string = decodeSimpleString(data), let value = string as? T { return value }
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

    // MARK: Fast paths

    private static func encodeString(_ string: String) -> Data {
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
        return Data(bytes)
    }

    /// Parses `-?[0-9]+` without overflow; anything else (spaces, exponents) goes to `JSONDecoder`.
    private static func decodeInt(_ data: Data) -> Int? {
        data.withUnsafeBytes { raw -> Int? in
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

    private static func decodeBool(_ data: Data) -> Bool? {
        if data.elementsEqual("true".utf8) { return true }
        if data.elementsEqual("false".utf8) { return false }
        return nil
    }

    /// Strings with no escapes, which is most of them; the rest go to `JSONDecoder`.
    private static func decodeSimpleString(_ data: Data) -> String? {
        data.withUnsafeBytes { raw -> String? in
            guard raw.count >= 2, raw.first == 0x22, raw.last == 0x22 else { return nil }
            let inner = UnsafeRawBufferPointer(rebasing: raw[1..<raw.count - 1])
            guard !inner.contains(where: { $0 == 0x5C || $0 == 0x22 || $0 < 0x20 }) else { return nil }
            return String(decoding: inner, as: UTF8.self)
        }
    }
}
