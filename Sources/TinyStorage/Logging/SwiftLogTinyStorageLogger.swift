public import Logging

/// Sends TinyStorage's messages to swift-log; the default logger on Linux.
///
/// ```swift
/// let storage = TinyStorage(
///     insideDirectory: directory, name: "settings",
///     logger: SwiftLogTinyStorageLogger(Logger(label: "com.example.app.storage")))
/// ```
public struct SwiftLogTinyStorageLogger: TinyStorageLogging {
    /// The swift-log logger messages go to.
    public let logger: Logger

    /// Logs to `logger`, by default one labelled `"TinyStorage"`.
    public init(_ logger: Logger = Logger(label: "TinyStorage")) {
        self.logger = logger
    }

    public func log(_ message: String, level: TinyStorageLogLevel) {
        let mapped: Logger.Level =
            switch level {
            case .debug: .debug
            case .info: .info
            case .warning: .warning
            case .error: .error
            }
        logger.log(level: mapped, "\(message)")
    }
}
