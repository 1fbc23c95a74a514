import Foundation

/// A namespace of keys: a `String` enum whose cases are stored under `prefix + "." + rawValue`.
///
/// Two groups may have cases with the same name without colliding, and call sites name the case,
/// never a string:
///
/// ```swift
/// enum AccountInfo: String, TinyStorageKeyGroup { case userName, token }
/// enum LoginInfo: String, TinyStorageKeyGroup { case token, userID }
///
/// let account = storage.group(AccountInfo.self)
/// account.store("ada", forKey: .userName)        // stored as "AccountInfo.userName"
/// storage.group(LoginInfo.self).store("t0k3n", forKey: .token)  // "LoginInfo.token"
/// let name = account.retrieve(type: String.self, forKey: .userName)
/// ```
///
/// **Naming rule.** A case is stored under ``prefix``, a dot, then the case's raw value:
/// `AccountInfo.userName`. The prefix defaults to the type's unqualified name
/// (`String(describing: Self.self)`), so renaming the type, or moving data between two nested
/// types of the same name, changes or shares stored names: declare `static let prefix` to pin it.
/// Keep prefixes unique and free of dots, and raw values free of dots, so that no two
/// (prefix, case) pairs produce the same name. The stored names are ordinary keys: every other
/// API, other processes and the `tinystorage` tool see them as they are.
///
/// A case also gives a typed key with a default, usable with `storage[…]` and `@TinyStorageItem`:
///
/// ```swift
/// extension TinyStorage.Key where Value == Int {
///     static var accountAge: Self { AccountInfo.age.key(default: 0) }
/// }
/// ```
public protocol TinyStorageKeyGroup: RawRepresentable, Hashable, Sendable where RawValue == String {
    /// The text before the dot in every stored name of this group. Defaults to the type's name.
    ///
    /// ```swift
    /// enum DisplaySettings: String, TinyStorageKeyGroup {
    ///     static let prefix = "display"  // stored as "display.font", not "DisplaySettings.font"
    ///     case font, backgroundImage
    /// }
    /// ```
    static var prefix: String { get }
}

extension TinyStorageKeyGroup {
    /// The type's unqualified name, such as `"AccountInfo"`: the default ``prefix``.
    ///
    /// Declare `static let prefix = "…"` in the group to override it.
    ///
    /// ```swift
    /// AccountInfo.prefix  // "AccountInfo"
    /// ```
    public static var prefix: String { String(describing: Self.self) }

    /// The name this case is stored under: `prefix + "." + rawValue`, such as `"AccountInfo.userName"`.
    ///
    /// ```swift
    /// storage.contains(AccountInfo.userName.storedName)
    /// ```
    public var storedName: String { Self.prefix + "." + rawValue }

    /// A typed key for this case, stored under ``storedName``, reading as `defaultValue` when absent.
    ///
    /// ```swift
    /// let age = storage[AccountInfo.age.key(default: 0)]
    /// ```
    ///
    /// - Parameter defaultValue: Returned when nothing is stored. Never written.
    public func key<Value>(default defaultValue: Value) -> TinyStorage.Key<Value> {
        TinyStorage.Key(storedName, default: defaultValue)
    }
}

extension TinyStorage {
    /// This store seen through a group of keys, so calls name the group's cases.
    ///
    /// ```swift
    /// let login = storage.group(LoginInfo.self)
    /// login.store(42, forKey: .userID)
    /// ```
    ///
    /// - Parameter group: The group's type, such as `AccountInfo.self`.
    /// - Returns: A lightweight view; create one wherever it is needed.
    public func group<Keys: TinyStorageKeyGroup>(_ group: Keys.Type) -> Group<Keys> {
        Group(storage: self)
    }

    /// A store seen through one ``TinyStorageKeyGroup``: the store's API with the group's cases
    /// as keys, each stored under its ``TinyStorageKeyGroup/storedName``.
    ///
    /// ```swift
    /// let display = storage.group(DisplaySettings.self)
    /// display[.font, default: "SF Pro"] = "New York"
    /// ```
    ///
    /// Every method behaves as the store's method of the same name; see those for the guarantees.
    public struct Group<Keys: TinyStorageKeyGroup>: Sendable {
        /// The store this view reads and writes.
        ///
        /// ```swift
        /// let account = storage.group(AccountInfo.self)
        /// account.storage === storage  // true
        /// ```
        public let storage: TinyStorage

        /// The value stored for `key`, or `nil` when absent (also, after logging, when the store is
        /// unavailable or the bytes do not decode as `T`).
        ///
        /// ```swift
        /// let name = account.retrieve(type: String.self, forKey: .userName)
        /// ```
        public func retrieve<T: Decodable & Sendable>(type: T.Type, forKey key: Keys) -> T? {
            storage.retrieve(type: type, forKey: key.storedName)
        }

        /// The value stored for `key`, or `nil` when absent from a store that was read.
        ///
        /// ```swift
        /// let token = try login.retrieveOrThrow(type: String.self, forKey: .token)
        /// ```
        ///
        /// - Throws: `.unavailable`, `.decodingFailed` (the bytes are kept), `.invalidKey`.
        public func retrieveOrThrow<T: Decodable & Sendable>(type: T.Type, forKey key: Keys) throws -> T? {
            try storage.retrieveOrThrow(type: type, forKey: key.storedName)
        }

        /// Stores `value` for `key` in one atomic commit; `nil` removes it. Logs failures.
        ///
        /// ```swift
        /// account.store(36, forKey: .age)
        /// ```
        public func store(_ value: (any Encodable)?, forKey key: Keys, writeID: String? = nil) {
            storage.store(value, forKey: key.storedName, writeID: writeID)
        }

        /// Stores `value` for `key` in one atomic commit; `nil` removes it.
        ///
        /// ```swift
        /// try login.storeOrThrow("t0k3n", forKey: .token)
        /// ```
        ///
        /// - Throws: As ``TinyStorage/storeOrThrow(_:forKey:writeID:)``: the value's own encoding
        ///   error, unchanged, or `.unavailable`, `.valueTooLarge`, `.invalidKey`, `.invalidWriteID`,
        ///   `.noSpace`, `.permissionDenied`, `.io`. When it throws, nothing was written.
        public func storeOrThrow(_ value: (any Encodable)?, forKey key: Keys, writeID: String? = nil) throws {
            try storage.storeOrThrow(value, forKey: key.storedName, writeID: writeID)
        }

        /// Removes the value for `key`, if any. Logs failures.
        ///
        /// ```swift
        /// login.remove(key: .token)
        /// ```
        public func remove(key: Keys, writeID: String? = nil) {
            storage.remove(key: key.storedName, writeID: writeID)
        }

        /// Whether a value is stored for `key`.
        ///
        /// ```swift
        /// if !login.contains(.token) { showLogin() }
        /// ```
        public func contains(_ key: Keys) -> Bool {
            storage.contains(key.storedName)
        }

        /// The value stored for `key`, or `defaultValue`; setting stores the new value.
        ///
        /// ```swift
        /// display[.font, default: "SF Pro"] = "New York"
        /// ```
        ///
        /// Like ``TinyStorage/subscript(_:)``: the default is never written, and failures are logged.
        public subscript<Value: Codable & Sendable>(key: Keys, default defaultValue: Value) -> Value {
            get { storage[key.key(default: defaultValue)] }
            nonmutating set { storage[key.key(default: defaultValue)] = newValue }
        }

        /// Reads, changes and writes back the value for `key` as one atomic step.
        ///
        /// ```swift
        /// try account.update(.age, as: Int.self) { age in age = (age ?? 0) + 1 }
        /// ```
        ///
        /// - Throws: as ``TinyStorage/update(_:as:writeID:_:)``: `.unavailable`, `.invalidKey`,
        ///   `.decodingFailed`, `.encodingFailed`, file-system errors, or what `body` throws.
        @discardableResult
        public func update<Value: Codable, Result>(
            _ key: Keys, as type: Value.Type = Value.self, writeID: String? = nil,
            _ body: (inout Value?) throws -> Result
        ) throws -> Result {
            try storage.update(key.storedName, as: type, writeID: writeID, body)
        }

        /// The group's cases that hold a value: in the order of `allCases` when the group is
        /// `CaseIterable`, otherwise sorted by ``TinyStorageKeyGroup/storedName``. Empty, after
        /// logging an error, when the store is unavailable.
        ///
        /// ```swift
        /// enum Onboarding: String, TinyStorageKeyGroup, CaseIterable { case welcome, permissions, done }
        ///
        /// let onboarding = storage.group(Onboarding.self)
        /// onboarding.store(true, forKey: .done)
        /// onboarding.store(true, forKey: .welcome)
        /// onboarding.storedKeys  // [.welcome, .done]: declaration order
        /// ```
        ///
        /// A case counts when a value is stored under its exact stored name; other names that
        /// merely start with the group's prefix are not the group's. The list is read at one
        /// instant: it never mixes the state before and after another thread's or process's commit.
        public var storedKeys: [Keys] {
            storage.logging { () throws(TinyStorageError) in
                try storage.engine.withLiveEntries { entries in Self.storedMembers(in: entries) }
            } ?? []
        }

        /// Removes every value of this group in one atomic commit. Logs failures.
        ///
        /// ```swift
        /// storage.group(LoginInfo.self).reset()  // log out
        /// ```
        ///
        /// See ``resetOrThrow(writeID:)`` for what is removed and what is guaranteed.
        public func reset(writeID: String? = nil) {
            storage.logging { () throws(TinyStorageError) in try removeAll(writeID: writeID) }
        }

        /// Removes every value of this group in one atomic commit; other keys are not touched.
        ///
        /// ```swift
        /// try storage.group(LoginInfo.self).resetOrThrow(writeID: "logout")
        /// ```
        ///
        /// What is removed is exactly ``storedKeys`` at the instant of the commit, read under the
        /// cross-process commit lock, so a case another process stored a moment earlier goes too.
        /// A key that merely shares the prefix (`"LoginInfo.tokenOld"` when `tokenOld` is not a
        /// case) survives. The commit is one record: after a crash, and in every other process,
        /// either all of the group's values are there or none; one `didChangeNotification` names
        /// every removed key (in ``storedKeys`` order) with `writeID`. A group with nothing
        /// stored writes and announces nothing.
        ///
        /// - Throws: `.unavailable` (nothing is removed), `.invalidWriteID`, or a file-system error
        ///   (`.noSpace`, `.permissionDenied`, `.io`).
        public func resetOrThrow(writeID: String? = nil) throws {
            try removeAll(writeID: writeID)
        }

        /// ``resetOrThrow(writeID:)``, with its error type known to the callers inside TinyStorage.
        func removeAll(writeID: String?) throws(TinyStorageError) {
            let writeID = try TinyStorage.validatedWriteID(writeID)
            try storage.engine.commit { entries in
                // NB: one record removing every stored case, in the order `storedKeys` lists
                // them, so the notification names them in that order too.
                let operations = Self.storedMembers(in: entries).map { LogOperation.remove(key: $0.storedName) }
                return Engine.Plan(
                    commit: operations.isEmpty ? nil : LogCommit(writeID: writeID, operations: SmallList(operations)),
                    result: ())
            }
        }

        /// The cases with a value in `entries`, in the group's order: `allCases` for a
        /// `CaseIterable` group (one lookup per case), otherwise sorted by stored name (one pass
        /// over the entries).
        static func storedMembers(in entries: LiveEntries) -> [Keys] {
            if let cases = declaredCases {
                return cases.filter { entries[$0.storedName] != nil }
            }
            // NB: only exact stored names: a `RawRepresentable` whose `init(rawValue:)` accepts
            // several spellings of one case would otherwise list it twice (and remove names
            // that are not its own).
            return entries.keys.compactMap { name in member(name).flatMap { $0.storedName == name ? $0 : nil } }
                .sorted { $0.storedName < $1.storedName }
        }

        /// `Keys.allCases` when the group is `CaseIterable`, else `nil`.
        ///
        /// NB: a dynamic check, not an overload for `CaseIterable` groups: an overload would be
        /// chosen by the caller's static type, so generic code over `TinyStorageKeyGroup` would
        /// get the other order.
        static var declaredCases: [Keys]? {
            guard let type = Keys.self as? any CaseIterable.Type else { return nil }
            return cases(of: type)
        }

        private static func cases<Group: CaseIterable>(of type: Group.Type) -> [Keys] {
            Group.allCases.compactMap { $0 as? Keys }
        }

        /// The case stored under `name`, or `nil` when `name` is not one of this group's names.
        static func member(_ name: String) -> Keys? {
            let prefix = Keys.prefix + "."
            guard name.hasPrefix(prefix) else { return nil }
            return Keys(rawValue: String(name.dropFirst(prefix.count)))
        }
    }
}
