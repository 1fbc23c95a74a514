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

    /// A whole store as one indented JSON object with sorted keys, ending in a newline.
    static func prettyObject(_ entries: [String: Data]) -> String {
        object(entries, separator: " : ") { pretty($0).replacingOccurrences(of: "\n", with: "\n  ") }
    }

    /// A whole store as one JSON object whose values are the stored bytes exactly, one key per
    /// line in sorted order, ending in a newline. `import` reads it back byte for byte.
    static func exportObject(_ entries: [String: Data]) -> String {
        object(entries, separator: ": ") { String(decoding: $0, as: UTF8.self) }
    }

    private static func object(
        _ entries: [String: Data], separator: String, showing value: (Data) -> String
    ) -> String {
        guard !entries.isEmpty else { return "{}\n" }
        let members = entries.keys.sorted().map { key in
            "  " + quoted(key) + separator + value(entries[key] ?? Data())
        }
        return "{\n" + members.joined(separator: ",\n") + "\n}\n"
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
