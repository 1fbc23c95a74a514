/// A key in a ``TinyStorage`` store.
///
/// `String` conforms, and so does any `String`-backed enum that declares it, which keeps keys
/// from drifting apart across call sites:
///
/// ```swift
/// enum AppKey: String, TinyStorageKey {
///     case streak, lastOpened
/// }
/// storage.store(365, forKey: AppKey.streak)
/// ```
///
/// A key is valid when its ``rawValue`` is not empty, contains no NUL character and is at most
/// ``TinyStorage/maximumKeyLength`` bytes of UTF-8; other keys are refused with `.invalidKey`.
public protocol TinyStorageKey: Hashable, Sendable {
    /// The name the value is stored under.
    var rawValue: String { get }
}

extension String: TinyStorageKey {
    /// The string itself.
    public var rawValue: String { self }
}

extension TinyStorage {
    /// The longest key accepted, in bytes of UTF-8.
    public static let maximumKeyLength = 1024
    /// The largest encoded value accepted, in bytes (of JSON, or of a `Data` value): 16 MiB.
    /// TinyStorage keeps every value in memory; it is made for small data.
    public static let maximumValueSize = 16 << 20
    /// The longest `writeID` accepted, in bytes of UTF-8. An empty writeID is allowed.
    ///
    /// A writeID travels with its commit, to this process's observers and to other processes';
    /// a longer one is refused with `.invalidWriteID`, and nothing is written.
    public static let maximumWriteIDLength = 1024

    /// Checks a key against the rules in ``TinyStorageKey`` and returns its stored name.
    static func validatedName(of key: any TinyStorageKey) throws(TinyStorageError) -> String {
        let name = key.rawValue
        let problem: String? = {
            if name.isEmpty { return "is empty" }
            if name.utf8.withContiguousStorageIfAvailable({ $0.contains(0) }) ?? name.utf8.contains(0) {
                return "contains a NUL character"
            }
            if name.utf8.count > maximumKeyLength { return "is longer than \(maximumKeyLength) bytes" }
            return nil
        }()
        if let problem {
            throw TinyStorageError(.invalidKey, "The key \(problem). Nothing was read or written.", key: name)
        }
        return name
    }

    /// Checks a writeID against ``maximumWriteIDLength``.
    static func validatedWriteID(_ writeID: String?) throws(TinyStorageError) -> String? {
        guard let writeID, writeID.utf8.count > maximumWriteIDLength else { return writeID }
        throw TinyStorageError(
            .invalidWriteID,
            "The writeID is \(writeID.utf8.count) bytes of UTF-8; the limit is \(maximumWriteIDLength). Pass a "
                + "short tag that identifies the writer (a UUID string is 36 bytes). Nothing was written.")
    }
}
