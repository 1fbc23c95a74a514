// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import Foundation
import TinyStorage

/// Checking JSON the user typed, and showing stored JSON to the user.
enum JSONText {
    /// Checks that `text` is one JSON value TinyStorage will accept and returns its bytes without
    /// the surrounding whitespace; otherwise a message saying where it goes wrong.
    ///
    /// Checks the syntax with ``JSONScanner``, then that Foundation can represent it (the check the
    /// library makes, which refuses numbers such as `1e400`), then the size limit.
    static func validatedValue(_ data: Data) -> Result<Data, CLIError> {
        let range: Range<Int>
        do {
            range = try JSONScanner.value(in: data)
        } catch {
            return .failure(CLIError(.invalidInput, "the value is not valid JSON: \(error.description)."))
        }
        let value = data.subdata(in: range)
        do {
            _ = try JSONSerialization.jsonObject(with: value, options: [.fragmentsAllowed])
        } catch {
            let reason = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "\(error)"
            return .failure(CLIError(.invalidInput, "the value is not JSON TinyStorage can store: \(reason)"))
        }
        guard value.count <= TinyStorage.maximumValueSize else {
            return .failure(
                CLIError(
                    .invalidInput,
                    "the value is \(value.count) bytes; the limit is \(TinyStorage.maximumValueSize)."))
        }
        return .success(value)
    }

    /// `string` as a JSON string literal: quoted, with `"`, `\` and control characters escaped.
    static func quoted(_ string: String) -> String {
        var result = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case "\u{0}"..<"\u{20}":
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }

    /// A stored value as indented JSON with sorted keys (no trailing newline).
    ///
    /// Numbers may be shown normalized (`1.0` as `1`); `read --raw` shows the bytes as stored.
    /// Bytes Foundation cannot parse are shown as they are rather than hidden.
    static func pretty(_ value: Data) -> String {
        guard let object = try? JSONSerialization.jsonObject(with: value, options: [.fragmentsAllowed]),
            let data = try? JSONSerialization.data(
                withJSONObject: object,
                options: [.prettyPrinted, .sortedKeys, .fragmentsAllowed, .withoutEscapingSlashes])
        else { return String(decoding: value, as: UTF8.self) }
        return String(decoding: data, as: UTF8.self)
    }

    /// A whole store as one indented JSON object with sorted keys, ending in a newline. Values
    /// that are raw bytes appear as base64 strings (see ``shown(_:)``).
    static func prettyObject(_ entries: [String: StoredValue]) -> String {
        object(entries.mapValues { shown($0).json }, separator: " : ") {
            pretty($0).replacingOccurrences(of: "\n", with: "\n  ")
        }
    }

    static func object(_ members: [String: Data], separator: String, showing value: (Data) -> String) -> String {
        guard !members.isEmpty else { return "{}\n" }
        let lines = members.keys.sorted().map { key in
            "  " + quoted(key) + separator + value(members[key] ?? Data())
        }
        return "{\n" + lines.joined(separator: ",\n") + "\n}\n"
    }

    /// A stored value as JSON: a JSON value as it is; a `Data` value, or an original value whose
    /// bytes are not JSON, as a JSON string of its bytes in base64 (`isBase64`).
    static func shown(_ value: StoredValue) -> (json: Data, isBase64: Bool) {
        if value.kind == .json || value.kind == .original && isJSON(value.bytes) { return (value.bytes, false) }
        return (Data(quoted(value.bytes.base64EncodedString()).utf8), true)
    }

    /// Whether Foundation parses `bytes` as one JSON value.
    static func isJSON(_ bytes: Data) -> Bool {
        (try? JSONSerialization.jsonObject(with: bytes, options: [.fragmentsAllowed])) != nil
    }

    /// The note for values shown as base64 instead of their bytes, or `nil` when there are none.
    static func base64Note(for keys: [String], rawAdvice: String) -> String? {
        guard !keys.isEmpty else { return nil }
        let list = keys.sorted().map(quoted).joined(separator: ", ")
        let what = keys.count == 1 ? "holds raw bytes (a Data value)" : "hold raw bytes (Data values)"
        return "\(list) \(what), shown as a base64 string; \(rawAdvice)"
    }
}

extension JSONText {
    /// A stored value as JSON on one line, without spaces, with sorted keys.
    ///
    /// Numbers may be shown normalized (`1.0` as `1`). Bytes Foundation cannot parse are shown as
    /// they are, with line breaks escaped, so the result is always one line.
    static func compact(_ value: Data) -> String {
        guard let object = try? JSONSerialization.jsonObject(with: value, options: [.fragmentsAllowed]),
            let data = try? JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys, .fragmentsAllowed, .withoutEscapingSlashes])
        else {
            return String(decoding: value, as: UTF8.self)
                .replacingOccurrences(of: "\r", with: "\\r").replacingOccurrences(of: "\n", with: "\\n")
        }
        return String(decoding: data, as: UTF8.self)
    }
}

#endif
