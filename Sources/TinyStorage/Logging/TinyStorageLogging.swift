/// How important a log message is.
public enum TinyStorageLogLevel: Int, Sendable, Hashable, Comparable, CaseIterable {
    /// Details useful while developing, such as a compaction finishing.
    case debug
    /// Normal events worth keeping, such as recovering a torn write after a crash.
    case info
    /// Something went wrong but no data was lost, such as a value that failed to decode.
    case warning
    /// An operation failed: the store is unavailable, or a write was refused.
    case error

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Receives TinyStorage's log messages.
///
/// Pass your own to `TinyStorage(insideDirectory:name:logger:)` to route messages elsewhere. The
/// default is `OSLogTinyStorageLogger` on Apple platforms and ``SwiftLogTinyStorageLogger``
/// (swift-log) elsewhere. Messages never contain stored values. Implementations are called
/// synchronously from the thread that used the store, never while TinyStorage holds a lock.
public protocol TinyStorageLogging: Sendable {
    /// Records one message.
    func log(_ message: String, level: TinyStorageLogLevel)
}

extension TinyStorage {
    /// The logger a store uses when none is given: `os.Logger` on Apple platforms, swift-log elsewhere.
    public static var defaultLogger: any TinyStorageLogging {
        #if canImport(os)
        OSLogTinyStorageLogger()
        #else
        SwiftLogTinyStorageLogger()
        #endif
    }
}
