import Foundation

/// One type a stored value failed to decode as, and why: the material of a `.decodingFailed`
/// error that says where each type went wrong, in words, without printing stored values.
struct DecodingFailure {
    var typeName: String
    /// The `.decodingFailed` error `ValueCoding` threw; its `underlying` is the decoder's error.
    var error: TinyStorageError

    /// The error a read throws when no type decodes `stored`: `failures` in the order tried, the
    /// first being the key's current type. Its `underlying` is the current type's decoding error.
    static func error(forKey name: String, stored: StoredValue, failures: [DecodingFailure]) -> TinyStorageError {
        let tree = JSONTree.parse(stored)
        let reasons = failures.map {
            "\($0.typeName) (\(reason(for: $0.error.underlying, key: name, tree: tree, stored: stored)))"
        }
        let message: String
        if let current = reasons.first, reasons.count > 1 {
            message =
                "The stored value could not be decoded as \(current), nor as the older types the key "
                + "migrates from: \(reasons.dropFirst().joined(separator: ", ")). It was left untouched: a newer "
                + "version of the app may have written it; `tinystorage read` shows it as stored."
        } else {
            message =
                "The stored value could not be decoded as \(reasons.first ?? "the requested type"). It was left "
                + "untouched; read it with the type it was stored as, or overwrite it."
        }
        return TinyStorageError(
            .decodingFailed, message, key: name, underlying: failures.first?.error.underlying,
            file: failures.first?.error.source.file ?? #fileID, line: failures.first?.error.source.line ?? #line)
    }

    /// Where decoding went wrong and why, such as `settings.theme: expected String, found number`.
    static func reason(for error: (any Error)?, key: String, tree: JSONTree?, stored: StoredValue) -> String {
        guard let error = error as? DecodingError else {
            return error.map { "\(key): \(type(of: $0)) thrown: \($0)" } ?? key
        }
        switch error {
        case .typeMismatch(let type, let context):
            let path = path(context.codingPath, key: key, tree: tree)
            return "\(path.text): expected \(name(of: type)), found \(found(at: path.node, stored: stored))"
        case .valueNotFound(let type, let context):
            return "\(path(context.codingPath, key: key, tree: tree).text): expected \(name(of: type)), found null"
        case .keyNotFound(let missing, let context):
            return "\(path(context.codingPath + [missing], key: key, tree: tree).text): missing"
        case .dataCorrupted(let context):
            let path = path(context.codingPath, key: key, tree: tree)
            guard tree != nil else {
                return "\(path.text): "
                    + (stored.kind == .json ? "not valid JSON" : "raw bytes (a Data value), not JSON")
            }
            return "\(path.text): \(found(at: path.node, stored: stored)) not accepted by the type"
        @unknown default:
            return "\(key): \(error)"
        }
    }

    /// `key.field[2].name` for a coding path, and the JSON found there when it exists.
    static func path(_ codingPath: [any CodingKey], key: String, tree: JSONTree?) -> (text: String, node: JSONTree?) {
        var text = key
        var node = tree
        for component in codingPath {
            switch node {
            case .array(let elements)?:
                // NB: JSONDecoder names an array element "Index 2", with the index as its intValue.
                let index = component.intValue ?? -1
                text += "[\(index)]"
                node = elements.indices.contains(index) ? elements[index] : nil
            case .object(let members)?:
                text += "." + component.stringValue
                node = members[component.stringValue]
            default:
                text += component.intValue.map { "[\($0)]" } ?? "." + component.stringValue
                node = nil
            }
        }
        return (text, node)
    }

    /// What the decoder expected, as a JSON reader would say it.
    static func name(of type: Any.Type) -> String {
        if type == [String: Any].self { return "object" }
        if type == [Any].self { return "array" }
        return String(describing: type)
    }

    /// What was found where decoding failed.
    static func found(at node: JSONTree?, stored: StoredValue) -> String {
        guard let node else { return stored.kind == .json ? "nothing readable" : "raw bytes (a Data value)" }
        return node.kindName
    }
}

/// A parsed JSON value, used only when decoding failed or an older type was read: to say what was
/// found where, and to tell whether an older type read everything a stored value holds.
indirect enum JSONTree: Decodable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONTree])
    case object([String: JSONTree])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let bool = try? container.decode(Bool.self) {
            self = .bool(bool)
        } else if let number = try? container.decode(Double.self) {
            self = .number(number)
        } else if let string = try? container.decode(String.self) {
            self = .string(string)
        } else if let array = try? container.decode([JSONTree].self) {
            self = .array(array)
        } else {
            self = .object(try container.decode([String: JSONTree].self))
        }
    }

    /// The stored value as JSON, or `nil` when its bytes are not JSON (raw `Data`, damaged text).
    static func parse(_ stored: StoredValue) -> JSONTree? {
        guard stored.kind != .data else { return nil }
        return try? JSONDecoder().decode(JSONTree.self, from: stored.bytes)
    }

    /// The JSON type's name: `number`, `string`, `object`…
    var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "bool"
        case .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    /// Whether this value holds everything `original` holds: the same scalars, arrays of the same
    /// length, and every member of an object that is not `null` (members it adds do not matter).
    func holdsEverything(in original: JSONTree) -> Bool {
        switch (original, self) {
        case (.object(let originalMembers), .object(let members)):
            return originalMembers.allSatisfy { name, value in
                value == .null || members[name]?.holdsEverything(in: value) == true
            }
        case (.array(let originalElements), .array(let elements)):
            return originalElements.count == elements.count
                && zip(originalElements, elements).allSatisfy { $1.holdsEverything(in: $0) }
        default:
            return original == self
        }
    }

    /// Whether encoding `older` again, as TinyStorage stores it, gives back everything `stored`
    /// holds. When it does not, the older type skipped fields it does not know: the bytes were
    /// probably written by a newer version of the app.
    static func encoding<Older: Encodable>(
        _ older: Older, keepsEverythingIn stored: StoredValue, forKey name: String
    ) -> Bool {
        guard let encoded = try? ValueCoding.encode(older, forKey: name) else { return false }
        if encoded.storage == stored.storage { return true }
        guard let original = parse(stored), let again = parse(encoded) else { return false }
        return again.holdsEverything(in: original)
    }
}
