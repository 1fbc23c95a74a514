#if canImport(SwiftUI)
public import SwiftUI
#endif

/// A property backed by one key of a ``TinyStorage`` store, with a default for when it is absent.
///
/// ```swift
/// struct StreakView: View {
///     @TinyStorageItem("streak", storage: .appStorage) var streak = 0
///
///     var body: some View {
///         Stepper("\(streak) days", value: $streak)
///     }
/// }
/// ```
///
/// Reading registers an Observation dependency on the key, so SwiftUI views (and
/// `withObservationTracking` on any platform) update when the key changes, in this process or
/// another. Setting stores the value (`store(_:forKey:)`); setting the default value stores it
/// too. With SwiftUI, `$property` is a `Binding`.
///
/// The default is returned when the key is absent, unreadable or holds another type, and nothing
/// is written back: use ``TinyStorage/retrieveOrThrow(type:forKey:)-5d5cr`` where "unknown" must
/// not look like the default.
@propertyWrapper
public struct TinyStorageItem<Value: Codable & Sendable>: Sendable {
    private let key: String
    private let defaultValue: Value
    private let storage: TinyStorage

    /// Binds the property to `key` in `storage`; `wrappedValue` is the default.
    public init(wrappedValue: Value, _ key: any TinyStorageKey, storage: TinyStorage) {
        self.key = key.rawValue
        self.defaultValue = wrappedValue
        self.storage = storage
    }

    /// The stored value, or the default when the key is absent.
    public var wrappedValue: Value {
        get {
            storage.observeAccess(to: key)
            return storage.retrieve(type: Value.self, forKey: key) ?? defaultValue
        }
        nonmutating set {
            storage.store(newValue, forKey: key)
        }
    }

    #if canImport(SwiftUI)
    /// A binding to the stored value, for controls such as `Toggle` and `TextField`.
    public var projectedValue: Binding<Value> {
        Binding(get: { wrappedValue }, set: { wrappedValue = $0 })
    }
    #endif
}

#if canImport(SwiftUI)
extension TinyStorageItem: DynamicProperty {}
#endif
