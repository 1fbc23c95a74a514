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
/// another; the change is signalled on the main queue, the main actor's. Setting stores the value
/// (`store(_:forKey:)`); setting the default value stores it too. With SwiftUI, `$property` is a
/// `Binding`.
///
/// `Value` may be any `Codable` type. A `Sendable` one is decoded once and cached until the key
/// changes; any other (a class, say) is decoded on every read, so no two reads share an instance.
///
/// The default is returned when the key is absent, unreadable or holds another type, and nothing
/// is written back: use ``TinyStorage/retrieveOrThrow(type:forKey:)-1m0vx`` where "unknown" must
/// not look like the default.
@propertyWrapper
public struct TinyStorageItem<Value: Codable> {
    private let key: String
    private let defaultValue: Value
    private let storage: TinyStorage
    /// How long each value set stays readable (a typed key's ``TinyStorage/Key/expiresAfter``).
    private let lifetime: Duration?
    /// Reads the value: through the decoded-value cache when `Value` is `Sendable`, and through
    /// the older shapes of a typed key that declares some.
    private let read: (TinyStorage, String) -> Value?

    /// Binds the property to `key` in `storage`; `wrappedValue` is the default. `Value` is decoded
    /// on every read.
    ///
    /// ```swift
    /// @TinyStorageItem("profile", storage: storage) var profile = Profile()  // a class
    /// ```
    public init(wrappedValue: Value, _ key: any TinyStorageKey, storage: TinyStorage) {
        self.key = key.rawValue
        self.defaultValue = wrappedValue
        self.storage = storage
        self.lifetime = nil
        self.read = { storage, key in storage.retrieve(type: Value.self, forKey: key) }
    }

    /// The stored value, or the default when the key is absent.
    ///
    /// Setting an optional property to `nil` removes the key (the original library stored JSON
    /// `null`), so the property reads its default again: `nil` when the default is `nil`, as in the
    /// original, and the default otherwise. Other processes see the key as absent.
    public var wrappedValue: Value {
        get {
            storage.observeAccess(to: key)
            return read(storage, key) ?? defaultValue
        }
        nonmutating set {
            storage.logging { () throws(TinyStorageError) in
                try storage.write(typed: newValue, forKey: key, writeID: nil, expiresAfter: lifetime)
            }
        }
    }

    #if canImport(SwiftUI)
    /// A binding to the stored value, for controls such as `Toggle` and `TextField`.
    public var projectedValue: Binding<Value> {
        // NB: `Binding(get:set:)` takes `@Sendable` closures, and this wrapper is `Sendable` only
        // when `Value` is: capturing `self` directly is a warning in Swift 6 mode, an error with
        // warnings as errors. The closures only go through the store, which is thread-safe, and
        // SwiftUI calls them on the main actor.
        nonisolated(unsafe) let item = self
        return Binding(get: { item.wrappedValue }, set: { item.wrappedValue = $0 })
    }
    #endif
}

// @unchecked: `read` captures nothing but the type it decodes (and a typed key, which is Sendable);
// the other properties are Sendable.
extension TinyStorageItem: @unchecked Sendable where Value: Sendable {}

extension TinyStorageItem where Value: Sendable {
    /// Binds the property to `key` in `storage`; `wrappedValue` is the default. The decoded value
    /// is cached until the key changes.
    ///
    /// ```swift
    /// @TinyStorageItem("streak", storage: storage) var streak = 0
    /// ```
    public init(wrappedValue: Value, _ key: any TinyStorageKey, storage: TinyStorage) {
        self.key = key.rawValue
        self.defaultValue = wrappedValue
        self.storage = storage
        self.lifetime = (key as? TinyStorage.Key<Value>)?.expiresAfter
        if let typed = key as? TinyStorage.Key<Value>, !typed.migrations.isEmpty {
            // NB: only a key with older shapes is kept; any other is read by its name, as before.
            self.read = { storage, _ in storage.typedValue(for: typed) }
        } else {
            self.read = { storage, key in storage.retrieve(type: Value.self, forKey: key) }
        }
    }

    /// Binds the property to a typed key in `storage`; the key's default is the property's default.
    ///
    /// A value stored in an older shape the key declares (``TinyStorage/Key/migrating(from:_:)``)
    /// is read as the current type, and written back so.
    ///
    /// ```swift
    /// extension TinyStorage.Key where Value == Int {
    ///     static var streak: Self { .init("streak", default: 0) }
    /// }
    ///
    /// @TinyStorageItem(.streak, storage: .appStorage) var streak: Int
    /// ```
    ///
    /// - Parameters:
    ///   - key: The key, whose ``TinyStorage/Key/defaultValue`` is returned when nothing is stored.
    ///   - storage: The store that holds the value.
    public init(_ key: TinyStorage.Key<Value>, storage: TinyStorage) {
        self.init(wrappedValue: key.defaultValue, key, storage: storage)
    }
}

#if canImport(SwiftUI)
extension TinyStorageItem: DynamicProperty {}
#endif
