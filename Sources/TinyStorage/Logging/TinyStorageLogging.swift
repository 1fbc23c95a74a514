/// How important a log message is: the original library's eight levels.
///
/// Ordered by severity (``trace`` lowest, ``critical`` and ``fault`` highest), so a logger can
/// filter with `level >= .warning`.
public enum TinyStorageLogLevel: Int, Sendable, Hashable, Comparable, CaseIterable {
    /// Step-by-step detail, finer than ``debug``.
    case trace
    /// Details useful while developing, such as a compaction finishing.
    case debug
    /// Normal events worth keeping, such as recovering a torn write after a crash.
    case info
    /// Normal but significant events, such as the store becoming available again.
    case notice
    /// Something went wrong but no data was lost, such as a value that failed to decode.
    case warning
    /// An operation failed: the store is unavailable, or a write was refused.
    case error
    /// A fault in the system around the store, such as a file system that misbehaves.
    case fault
    /// A failure that needs attention now.
    case critical

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Receives TinyStorage's log messages.
///
/// The original library's protocol, unchanged, so a logger written for it conforms as it is.
/// Pass your own to `TinyStorage(insideDirectory:name:logger:)` to route messages elsewhere; the
/// default is `OSLogTinyStorageLogger` on Apple platforms and ``SwiftLogTinyStorageLogger``
/// (swift-log) elsewhere. Messages never contain stored values.
///
/// ```swift
/// final class AppLogger: TinyStorageLogging {
///     private(set) var count = 0  // mutable state is fine; see the threading note below
///
///     func log(_ level: TinyStorageLogLevel, _ message: String, file: String, function: String, line: Int) {
///         print("[\(level)] \(file):\(line) \(message)")
///     }
/// }
/// ```
///
/// - Important: The protocol does not require `Sendable`, but TinyStorage calls `log` from
///   whatever thread is using the store, and from its own background threads (file events,
///   background flushes, change delivery), possibly from several at once. A logger with mutable
///   state must protect it itself (a lock, or hand the message to a queue).
public protocol TinyStorageLogging {
    /// Records one message.
    ///
    /// - Parameters:
    ///   - level: How important the message is.
    ///   - message: What happened, naming keys and paths but never values.
    ///   - file: The file inside TinyStorage that logged it (`#fileID`).
    ///   - function: The function that logged it.
    ///   - line: The line that logged it.
    func log(_ level: TinyStorageLogLevel, _ message: String, file: String, function: String, line: Int)
}

extension TinyStorage {
    /// The logger a store uses when none is given: `os.Logger` on Apple platforms (subsystem
    /// `TinyStorage`, category `storage`; the unified logging system keeps debug and info messages
    /// only while they are streamed), swift-log elsewhere (label `TinyStorage`, warnings and more
    /// severe messages only; see ``SwiftLogTinyStorageLogger/init()``).
    ///
    /// Pass your own logger to a store to route its messages elsewhere, to see its informational
    /// ones, or to silence it:
    ///
    /// ```swift
    /// struct SilentLogger: TinyStorageLogging {
    ///     func log(_ level: TinyStorageLogLevel, _ message: String, file: String, function: String, line: Int) {}
    /// }
    /// let storage = TinyStorage(insideDirectory: directory, name: "settings", logger: SilentLogger())
    /// ```
    public static var defaultLogger: any TinyStorageLogging {
        #if canImport(os)
        OSLogTinyStorageLogger()
        #else
        SwiftLogTinyStorageLogger()
        #endif
    }
}

/// A store's logger, callable from any thread, passing the call site inside TinyStorage on.
struct LogSink: @unchecked Sendable {
    // @unchecked: TinyStorageLogging documents that TinyStorage calls a logger from its own threads.
    let logger: any TinyStorageLogging

    init(_ logger: any TinyStorageLogging) { self.logger = logger }

    func log(
        _ level: TinyStorageLogLevel, _ message: String, file: String = #fileID, function: String = #function,
        line: Int = #line
    ) {
        logger.log(level, message, file: file, function: function, line: line)
    }
}
