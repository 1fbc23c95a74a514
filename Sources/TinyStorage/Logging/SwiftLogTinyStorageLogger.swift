public import Logging

/// Sends TinyStorage's messages to swift-log; the default logger on Linux.
///
/// ```swift
/// let storage = TinyStorage(
///     insideDirectory: directory, name: "settings",
///     logger: SwiftLogTinyStorageLogger(Logger(label: "com.example.app.storage")))
/// ```
///
/// `fault` and `critical` both map to swift-log's `critical`; the call site inside TinyStorage
/// becomes the record's source location.
public struct SwiftLogTinyStorageLogger: TinyStorageLogging, Sendable {
    /// The swift-log logger messages go to.
    public let logger: Logger

    /// Logs to `logger`, by default one labelled `"TinyStorage"`.
    public init(_ logger: Logger = Logger(label: "TinyStorage")) {
        self.logger = logger
    }

    public func log(_ level: TinyStorageLogLevel, _ message: String, file: String, function: String, line: Int) {
        let mapped: Logger.Level =
            switch level {
            case .trace: .trace
            case .debug: .debug
            case .info: .info
            case .notice: .notice
            case .warning: .warning
            case .error: .error
            case .fault, .critical: .critical
            }
        logger.log(level: mapped, "\(message)", file: file, function: function, line: UInt(line))
    }
}
