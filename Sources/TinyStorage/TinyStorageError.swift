/// The one error type TinyStorage throws.
///
/// Match on ``code`` to decide what to do; show ``description`` to a developer. Descriptions
/// name keys and paths but never print stored values.
///
/// **A value that fails to encode.** The calls spelled as in the original TinyStorage library,
/// `storeOrThrow(_:forKey:writeID:)` on a store or on a key group, rethrow the error the value's
/// `encode(to:)` (or `JSONEncoder`) threw, unchanged, as the original does, so an app's
/// `catch MyError.…` keeps working. Every other call (`bulkStoreOrThrow`, `update`, typed keys,
/// `migrate`) throws this type with code ``Code/encodingFailed`` and that error as ``underlying``.
/// Everything else — an unavailable store, an invalid key, a full disk — is this type everywhere.
///
/// ```swift
/// do {
///     let streak = try storage.retrieveOrThrow(type: Int.self, forKey: "streak") ?? 0
///     storage.store(streak + 1, forKey: "streak")
/// } catch TinyStorageError.Code.unavailable {
///     // The file cannot be read right now: do not treat the streak as 0.
/// } catch {
///     // Any other code (new ones may come), or your value's own encoding error.
/// }
/// ```
///
/// **Why `throws`, not `throws(TinyStorageError)`.** The throwing methods are declared with
/// untyped `throws`, as the original library's are. The codes grow from one release to the next,
/// so no `catch` list is exhaustive and a final `catch` is needed anyway; a ``Code`` pattern
/// matches any error; and the Swift 6.3 compiler crashes on a `do` block that calls a
/// typed-throwing function and does not catch everything inside a function that throws `any
/// Error` — the natural way to handle one code and pass the rest on. Read the code of an error you
/// caught with `(error as? TinyStorageError)?.code`.
public struct TinyStorageError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, as an extensible set of codes (new codes may be added in minor releases,
    /// so `switch` statements over codes need a `default`).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's stable name, such as `"unavailable"`.
        public let rawValue: String

        /// Creates a code from its stable name.
        public init(_ rawValue: String) { self.rawValue = rawValue }

        public var description: String { rawValue }

        /// The store's file could not be created, opened or read, so the store refuses to answer
        /// rather than pretend to be empty. ``TinyStorageError/underlying`` says why.
        public static let unavailable = Code("unavailable")
        /// Part of the file failed its checksum or could not be parsed.
        public static let corrupted = Code("corrupted")
        /// The stored bytes for a key could not be decoded as the requested type. The bytes are kept.
        public static let decodingFailed = Code("decodingFailed")
        /// The value could not be encoded as JSON (it threw, or it holds a non-finite number).
        public static let encodingFailed = Code("encodingFailed")
        /// The key is empty, contains NUL, or is longer than ``TinyStorage/maximumKeyLength``.
        public static let invalidKey = Code("invalidKey")
        /// The `writeID` is longer than ``TinyStorage/maximumWriteIDLength`` bytes of UTF-8.
        public static let invalidWriteID = Code("invalidWriteID")
        /// The store name is empty, `.`, `..`, contains `/` or NUL, or is too long.
        public static let invalidName = Code("invalidName")
        /// The encoded value is larger than ``TinyStorage/maximumValueSize``.
        public static let valueTooLarge = Code("valueTooLarge")
        /// The lifetime given for a value that expires (`expiresAfter:`) is zero or negative.
        /// Nothing was written.
        public static let invalidExpiration = Code("invalidExpiration")
        /// The file system reported an error other than the specific ones below.
        public static let io = Code("io")
        /// The disk or quota is full.
        public static let noSpace = Code("noSpace")
        /// The store was opened read-only (``TinyStorage/Access/readOnly``): it writes nothing, and
        /// nothing was written.
        public static let readOnly = Code("readOnly")
        /// The write would take the store's live data past ``TinyStorage/sizeLimit``; nothing was
        /// written. Remove values, or raise the limit.
        public static let sizeLimitExceeded = Code("sizeLimitExceeded")
        /// The process may not read or write the store's files.
        public static let permissionDenied = Code("permissionDenied")
        /// The file was written by a newer version of TinyStorage whose format this one cannot read.
        public static let unsupportedFormat = Code("unsupportedFormat")
        /// A migration was refused before writing anything, because its source did not look
        /// trustworthy (for example, the sentinel key required to be present in `UserDefaults`
        /// was missing, which is how an unavailable `UserDefaults` looks).
        public static let migrationRefused = Code("migrationRefused")
        /// Something at one of the store's paths is not a file the store can trust: a symbolic
        /// link, a hard link, a FIFO, a socket, a directory where a file belongs, a file owned by
        /// another user, or a store directory other users can write to. The message names the path
        /// and what is wrong there; nothing was read from or written to it.
        public static let unsafeFile = Code("unsafeFile")
    }

    /// What went wrong.
    public let code: Code
    /// A sentence saying what happened and what to do about it.
    public let message: String
    /// The key involved, when there is one.
    public let key: String?
    /// The error that caused this one, such as a `DecodingError` or a system error.
    public let underlying: (any Error)?
    /// Where the error was raised inside TinyStorage, for bug reports.
    public let source: (file: String, line: Int)

    package init(
        _ code: Code, _ message: String, key: String? = nil, underlying: (any Error)? = nil,
        file: String = #fileID, line: Int = #line
    ) {
        self.code = code
        self.message = message
        self.key = key
        self.underlying = underlying
        self.source = (file, line)
    }

    /// `TinyStorageError.<code>: <message> [key: <key>] (cause: <cause>)`, each sentence once.
    ///
    /// NB: an error that wraps another often repeats the inner one's message in its own (an
    /// `.unavailable` store says why in its own words); the inner error is then named by its code
    /// only, followed by its own cause, the system's reason:
    /// `… Could not open '…/store.lock': check … (cause: permissionDenied: Permission denied (errno 13))`.
    public var description: String {
        var text = "TinyStorageError.\(code): \(message)"
        if let key { text += " [key: \(key)]" }
        var repeated: [String] = []
        var cause = underlying
        while let inner = cause as? TinyStorageError, text.contains(inner.message) {
            repeated.append(inner.code.rawValue)
            cause = inner.underlying
        }
        let causes = repeated + (cause.map { ["\($0)"] } ?? [])
        if !causes.isEmpty { text += " (cause: \(causes.joined(separator: ": ")))" }
        return text
    }
}

extension TinyStorageError.Code {
    /// Lets `catch TinyStorageError.Code.unavailable` match a thrown error by its code.
    public static func ~= (code: Self, error: any Error) -> Bool {
        (error as? TinyStorageError)?.code == code
    }
}

extension TinyStorageError {
    /// Translates a system error into the code a caller can act on.
    static func system(
        _ error: Errno, _ action: String, path: String, key: String? = nil,
        file: String = #fileID, line: Int = #line
    ) -> TinyStorageError {
        let code: Code
        let advice: String
        switch error {
        case Errno.accessDenied, Errno.notPermitted, Errno.readOnlyFileSystem:
            code = .permissionDenied
            advice = "check the owner and permissions of the store directory and its files"
        case Errno.noSpace, Errno.quotaExceeded:
            code = .noSpace
            advice = "free some disk space; nothing was written"
        default:
            code = .io
            advice = "the file system reported an error; nothing was changed"
        }
        return TinyStorageError(
            code, "Could not \(action) '\(path)': \(advice).", key: key, underlying: error,
            file: file, line: line)
    }
}
