import Foundation

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
    ///
    /// NB: every read and write of a key starts here, so a valid key costs a look at its length
    /// and one `memchr` over its bytes (a loop over the bytes took a quarter more instructions
    /// for a ten-byte key); why a key is refused is worked out only when it is. Generic, so a
    /// caller's `any TinyStorageKey` is opened where it lies instead of being copied into a new
    /// existential box for the call.
    static func validatedName(of key: some TinyStorageKey) throws(TinyStorageError) -> String {
        var name = key.rawValue
        let count = name.utf8.count
        // NB: `withUTF8` reads a native string's bytes where they are (a small string's from a
        // copy on the stack); a string that is not empty has a base address.
        guard count > 0, count <= maximumKeyLength,
            name.withUTF8({ $0.baseAddress.map { memchr($0, 0, count) == nil } ?? false })
        else { throw invalidKey(name) }
        return name
    }

    /// The error for a key ``validatedName(of:)`` refused, naming the first rule it breaks.
    private static func invalidKey(_ name: String) -> TinyStorageError {
        let problem =
            if name.isEmpty {
                "is empty"
            } else if name.utf8.contains(0) {
                "contains a NUL character"
            } else {
                "is longer than \(maximumKeyLength) bytes"
            }
        return TinyStorageError(.invalidKey, "The key \(problem). Nothing was read or written.", key: name)
    }

    /// Checks a writeID against ``maximumWriteIDLength``.
    ///
    /// NB: inlined, with the message built in a function of its own, so a `nil` writeID costs
    /// a test and a branch where it is checked; the call took about 50 instructions of an `Int`
    /// overwrite, the engine's own check included.
    @inline(__always) static func validatedWriteID(_ writeID: String?) throws(TinyStorageError) -> String? {
        guard let writeID, writeID.utf8.count > maximumWriteIDLength else { return writeID }
        throw invalidWriteID(writeID)
    }

    /// The error for a writeID ``validatedWriteID(_:)`` refused.
    private static func invalidWriteID(_ writeID: String) -> TinyStorageError {
        TinyStorageError(
            .invalidWriteID,
            "The writeID is \(writeID.utf8.count) bytes of UTF-8; the limit is \(maximumWriteIDLength). Pass a "
                + "short tag that identifies the writer (a UUID string is 36 bytes). Nothing was written.")
    }
}
