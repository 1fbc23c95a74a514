// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import Foundation
import TinyStorage

/// The file `export` writes and `import` reads: one JSON object of key to value, plus, when the
/// store holds values that are not plain JSON, a member that says how to read those back.
///
/// ```json
/// {
///   "blob": "AAECAw==",
///   "streak": 365,
///   "$tinystorage.kinds": {"blob": "data"}
/// }
/// ```
///
/// Kinds: `data`, a `Data` value, written as a base64 string of its bytes; `original`, a value
/// adopted from the original TinyStorage library (or written by an older version of this one),
/// whose bytes are JSON and are written as they are; `original-base64`, such a value whose bytes
/// are not JSON, written in base64. Keys not listed are JSON, written byte for byte. So an
/// export imported into another store gives every key the same bytes and the same kind.
enum ExportFormat {
    /// The reserved member that lists the kinds; a store key of this name cannot be exported.
    static let kindsMember = "$tinystorage.kinds"

    /// The export of `entries`, ending in a newline.
    /// - Throws: `.invalidInput` when the store holds a key named ``kindsMember``.
    static func text(of entries: [String: StoredValue]) throws(CLIError) -> String {
        if entries[kindsMember] != nil {
            throw CLIError(
                .invalidInput,
                "the store holds a key named \(JSONText.quoted(kindsMember)), the name export reserves for "
                    + "the kinds of its values. Rename that key to export the store.")
        }
        var members: [String: Data] = [:]
        var kinds: [String: String] = [:]
        for (key, value) in entries {
            let shown = JSONText.shown(value)
            members[key] = shown.json
            switch value.kind {
            case .json: break
            case .data: kinds[key] = "data"
            case .original: kinds[key] = shown.isBase64 ? "original-base64" : "original"
            }
        }
        var text = JSONText.object(members, separator: ": ") { String(decoding: $0, as: UTF8.self) }
        if !kinds.isEmpty {
            let list = kinds.keys.sorted().map { JSONText.quoted($0) + ": " + JSONText.quoted(kinds[$0] ?? "") }
            let member = "  " + JSONText.quoted(kindsMember) + ": {" + list.joined(separator: ", ") + "}"
            text = text.hasPrefix("{}") ? "{\n\(member)\n}\n" : String(text.dropLast(3)) + ",\n" + member + "\n}\n"
        }
        return text
    }

    /// The kinds listed in an export's ``kindsMember``, by key.
    /// - Throws: a message when the member is not an object of known kind names.
    static func kinds(from json: Data) -> Result<[String: String], CLIError> {
        guard let object = try? JSONSerialization.jsonObject(with: json) as? [String: Any] else {
            return .failure(CLIError(.invalidInput, "\(JSONText.quoted(kindsMember)) is not an object of key to kind."))
        }
        var kinds: [String: String] = [:]
        for (key, kind) in object {
            guard let kind = kind as? String, ["data", "original", "original-base64"].contains(kind) else {
                return .failure(
                    CLIError(
                        .invalidInput,
                        "\(JSONText.quoted(kindsMember)) gives \(JSONText.quoted(key)) an unknown kind; the kinds are "
                            + "\"data\", \"original\" and \"original-base64\"."))
            }
            kinds[key] = kind
        }
        return .success(kinds)
    }

    /// The value to store for one member of an export, given its kind (`nil`: JSON).
    static func value(_ json: Data, kind: String?) -> Result<StoredValue, CLIError> {
        switch kind {
        case nil:
            return .success(StoredValue(json, kind: .json))
        case "original":
            return .success(StoredValue(json, kind: .original))
        default:
            guard let text = try? JSONDecoder().decode(String.self, from: json), let bytes = Data(base64Encoded: text)
            else {
                return .failure(CLIError(.invalidInput, "its kind is \(kind ?? "") but it is not a base64 string."))
            }
            return .success(StoredValue(bytes, kind: kind == "data" ? .data : .original))
        }
    }
}

#endif
