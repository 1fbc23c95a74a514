import Foundation

/// A property-list value read from `UserDefaults`, in the shapes a migration supports: scalars,
/// and flat arrays and dictionaries of scalars.
///
/// Encodes as the Swift type it came from would (`Int` as a number, `Date` with `JSONEncoder`'s
/// default strategy; a top-level `Data` as its raw bytes, `Data` inside a collection as base64),
/// so `retrieve(type: [Date].self, …)` and `retrieve(type: Data.self, …)` read back what
/// `UserDefaults` held.
enum UserDefaultsValue: Encodable {
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case date(Date)
    case data(Data)
    case array([UserDefaultsValue])
    case dictionary([String: UserDefaultsValue])

    /// Converts what `UserDefaults.object(forKey:)` returned, or says why it cannot.
    ///
    /// NB: a property list tells `<true/>` from `<integer>`; Foundation keeps that as the
    /// `NSNumber`'s `objCType` `"c"` (a `CFBoolean` on Darwin, a bridged `Bool` in corelibs), so
    /// booleans are recognized without `boolKeys`, while `as? Int` alone would turn them into 0 or 1.
    static func from(_ object: Any) -> Conversion {
        guard let object = unwrapped(object) else { return .refused(.unsupportedType) }
        if let scalar = scalar(object) { return .converted(scalar) }
        if let array = object as? [Any] {
            var elements: [Self] = []
            elements.reserveCapacity(array.count)
            for item in array {
                switch element(item) {
                case .converted(let value): elements.append(value)
                case .refused(let reason): return .refused(reason)
                }
            }
            return .converted(.array(elements))
        }
        if let dictionary = object as? [AnyHashable: Any] {
            var values: [String: Self] = [:]
            for (key, item) in dictionary {
                guard let key = key.base as? String else { return .refused(.unsupportedType) }
                switch element(item) {
                case .converted(let value): values[key] = value
                case .refused(let reason): return .refused(reason)
                }
            }
            return .converted(.dictionary(values))
        }
        return .refused(.unsupportedType)
    }

    /// The value of a key listed in `boolKeys`: a number read as `UserDefaults.bool(forKey:)`
    /// does, or a flat array or string-keyed dictionary of them (`[Bool]`, `[String: Bool]`), as
    /// the original library accepts.
    static func boolValue(_ object: Any) -> Conversion {
        func bool(_ element: Any) -> Conversion {
            guard let element = unwrapped(element) else { return .refused(.notABool) }
            if let number = element as? NSNumber { return .converted(.bool(number.boolValue)) }
            if element is [Any] || element is [AnyHashable: Any] { return .refused(.nestedCollection) }
            return .refused(.notABool)
        }
        guard let object = unwrapped(object) else { return .refused(.notABool) }
        if let array = object as? [Any] {
            var elements: [Self] = []
            for item in array {
                switch bool(item) {
                case .converted(let value): elements.append(value)
                case .refused(let reason): return .refused(reason)
                }
            }
            return .converted(.array(elements))
        }
        if let dictionary = object as? [AnyHashable: Any] {
            var values: [String: Self] = [:]
            for (key, item) in dictionary {
                guard let key = key.base as? String else { return .refused(.notABool) }
                switch bool(item) {
                case .converted(let value): values[key] = value
                case .refused(let reason): return .refused(reason)
                }
            }
            return .converted(.dictionary(values))
        }
        return bool(object)
    }

    /// The value as its own Swift type at the top level (so its bytes match what `store` writes),
    /// or `self` for collections.
    var encodable: any Encodable {
        switch self {
        case .bool(let value): value
        case .int(let value): value
        case .double(let value): value
        case .string(let value): value
        case .date(let value): value
        case .data(let value): value
        case .array, .dictionary: self
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .date(let value): try container.encode(value)
        case .data(let value): try container.encode(value)
        case .array(let values): try container.encode(values)
        case .dictionary(let values): try container.encode(values)
        }
    }

    /// The outcome of converting one `UserDefaults` object.
    enum Conversion {
        case converted(UserDefaultsValue)
        case refused(TinyStorage.MigrationReport.Reason)
    }

    // MARK: Internals

    /// An element of an array or dictionary: a scalar; another collection is not supported.
    private static func element(_ object: Any) -> Conversion {
        guard let object = unwrapped(object) else { return .refused(.unsupportedType) }
        if let scalar = scalar(object) { return .converted(scalar) }
        if object is [Any] || object is [AnyHashable: Any] { return .refused(.nestedCollection) }
        return .refused(.unsupportedType)
    }

    private static func scalar(_ object: Any) -> Self? {
        switch object {
        case let string as String: return .string(string)
        case let data as Data: return .data(data)
        case let date as Date: return .date(date)
        case let number as NSNumber: return self.number(number)
        default: return nil
        }
    }

    /// NB: a property list tells `<true/>` from `<integer>1</integer>`, and Foundation keeps the
    /// difference as the number's `objCType`: `"c"` for a boolean, so `as? Bool` (which accepts
    /// any 0 or 1) never decides. Unsigned integers past `Int.max` are refused, not rounded.
    private static func number(_ number: NSNumber) -> Self? {
        switch String(cString: number.objCType) {
        case "c", "B": return .bool(number.boolValue)
        case "d", "f": return .double(number.doubleValue)
        case "Q", "L", "I", "S", "C":
            guard number.uint64Value <= UInt64(Int.max) else { return nil }
            return .int(Int(number.uint64Value))
        default: return .int(number.intValue)
        }
    }

    /// A short name for the kind of value, for reports.
    var kind: String {
        switch self {
        case .bool: "Bool"
        case .int: "Int"
        case .double: "Double"
        case .string: "String"
        case .date: "Date"
        case .data: "Data"
        case .array: "array"
        case .dictionary: "dictionary"
        }
    }

    /// `object` without `Optional` wrappers (corelibs returns array elements as `Optional<Any>`).
    static func unwrapped(_ object: Any) -> Any? {
        guard let optional = object as? any OptionalValue else { return object }
        return optional.wrappedAny.flatMap(unwrapped)
    }
}
