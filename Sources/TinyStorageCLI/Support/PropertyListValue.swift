import Foundation
import TinyStorage

/// A value read from a property list or `UserDefaults`, in the shapes TinyStorage imports:
/// `Bool`, integers, doubles, strings, dates, data, and arrays and dictionaries of those.
///
/// Encodes the way `TinyStorage.store(_:forKey:)` encodes the Swift type it came from, so an app
/// that later reads `retrieve(type: Date.self, …)` or `[String: Int].self` gets what
/// `UserDefaults` held, and storing the same value again changes no byte:
///
/// ```swift
/// let value = try PropertyListValue.converting(NSNumber(value: 365)).get()
/// value.json  // "365"
/// ```
enum PropertyListValue: Encodable {
    case bool(Bool)
    case integer(Int)
    case double(Double)
    case string(String)
    case date(Date)
    case data(Data)
    case array([PropertyListValue])
    case dictionary([String: PropertyListValue])

    /// Why a value is not imported.
    enum Refusal: Error {
        /// A kind TinyStorage's import does not support: a collection inside a collection, or
        /// a type that is not a property-list type. The key is skipped.
        case unsupported(String)
        /// A supported kind that cannot be stored: a non-finite number, an integer too large, a
        /// value over the size limit. The key failed.
        case failed(String)
    }

    /// Converts `object` as `PropertyListSerialization` or `UserDefaults` returned it.
    static func converting(_ object: Any) -> Result<Self, Refusal> {
        convert(object, nested: false)
    }

    /// The JSON bytes TinyStorage stores for the value.
    ///
    /// Scalars take the library's own encodings (`Int` and `Double` as Swift prints them, strings
    /// with only the escapes JSON needs); dates, data and collections go through `JSONEncoder`
    /// with sorted keys and its default strategies (a date as seconds since 2001, data as base64),
    /// as the library does.
    func json() -> Result<Data, Refusal> {
        let bytes: Data
        switch self {
        case .bool(let value): bytes = Data((value ? "true" : "false").utf8)
        case .integer(let value): bytes = Data(String(value).utf8)
        case .double(let value) where value.isFinite: bytes = Data(value.description.utf8)
        case .double: return .failure(.failed("a number that is not finite (NaN or infinity), which JSON cannot hold"))
        case .string(let value): bytes = Data(JSONText.quoted(value).utf8)
        case .date, .data, .array, .dictionary:
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            do {
                bytes = try encoder.encode(self)
            } catch {
                return .failure(
                    .failed("it holds a number that is not finite (NaN or infinity), which JSON cannot hold"))
            }
        }
        guard bytes.count <= TinyStorage.maximumValueSize else {
            return .failure(.failed("it is \(bytes.count) bytes as JSON; the limit is \(TinyStorage.maximumValueSize)"))
        }
        return .success(bytes)
    }

    /// A short name for the kind of value, for the summary.
    var kind: String {
        switch self {
        case .bool: "Bool"
        case .integer: "Int"
        case .double: "Double"
        case .string: "String"
        case .date: "Date"
        case .data: "Data"
        case .array: "array"
        case .dictionary: "dictionary"
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .date(let value): try container.encode(value)
        case .data(let value): try container.encode(value)
        case .array(let values): try container.encode(values)
        case .dictionary(let values): try container.encode(values)
        }
    }

    // MARK: Converting

    private static func convert(_ object: Any, nested: Bool) -> Result<Self, Refusal> {
        guard let object = unwrapped(object) else { return .failure(.unsupported("an empty value")) }
        switch object {
        case let string as String: return .success(.string(string))
        case let date as Date: return .success(.date(date))
        case let data as Data: return .success(.data(data))
        case let number as NSNumber: return self.number(number)
        default: break
        }
        let isArray = object is [Any]
        if isArray || object is [AnyHashable: Any] {
            if nested {
                return .failure(
                    .unsupported("a nested collection (an array or dictionary inside another), which is not supported"))
            }
            return isArray ? array(object as? [Any] ?? []) : dictionary(object as? [AnyHashable: Any] ?? [:])
        }
        return .failure(.unsupported("a value of type \(type(of: object)), which is not a property-list type"))
    }

    private static func array(_ items: [Any]) -> Result<Self, Refusal> {
        var values: [Self] = []
        values.reserveCapacity(items.count)
        for item in items {
            switch convert(item, nested: true) {
            case .success(let value): values.append(value)
            case .failure(let refusal): return .failure(refusal)
            }
        }
        return .success(.array(values))
    }

    private static func dictionary(_ items: [AnyHashable: Any]) -> Result<Self, Refusal> {
        var values: [String: Self] = [:]
        for (key, item) in items {
            guard let key = key.base as? String else {
                return .failure(.unsupported("a dictionary whose keys are not all strings"))
            }
            switch convert(item, nested: true) {
            case .success(let value): values[key] = value
            case .failure(let refusal): return .failure(refusal)
            }
        }
        return .success(.dictionary(values))
    }

    /// NB: a property list tells `<true/>` from `<integer>1</integer>`, and Foundation keeps the
    /// difference as the number's `objCType`: `"c"` for a boolean (a `CFBoolean` on Apple
    /// platforms, a bridged `Bool` on Linux), so `as? Bool` — which accepts any 0 or 1 — is
    /// never used to decide.
    private static func number(_ number: NSNumber) -> Result<Self, Refusal> {
        switch String(cString: number.objCType) {
        case "c", "B": return .success(.bool(number.boolValue))
        case "d", "f": return .success(.double(number.doubleValue))
        case "Q", "L", "I", "S", "C":
            guard number.uint64Value <= UInt64(Int.max) else {
                return .failure(.failed("the integer \(number.uint64Value) is larger than Int can hold"))
            }
            return .success(.integer(Int(number.uint64Value)))
        default:
            return .success(.integer(number.intValue))
        }
    }

    /// `object` without `Optional` wrappers: corelibs Foundation returns the values of a
    /// `persistentDomain` wrapped in `Optional<Any>`.
    static func unwrapped(_ object: Any) -> Any? {
        guard let optional = object as? any OptionalBox else { return object }
        return optional.wrappedObject.flatMap(unwrapped)
    }
}

/// Lets ``PropertyListValue/unwrapped(_:)`` look inside an `Optional` held as `Any`.
protocol OptionalBox {
    var wrappedObject: Any? { get }
}

extension Optional: OptionalBox {
    var wrappedObject: Any? { self.map { $0 as Any } }
}
