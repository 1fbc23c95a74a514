public import Logging

/// Sends TinyStorage's messages to swift-log; the default logger on Linux.
///
/// ```swift
/// var logger = Logger(label: "com.example.MyApp.storage")
/// logger.logLevel = .info  // the store's recoveries and migrations too
/// let storage = TinyStorage(
///     insideDirectory: directory, name: "settings", logger: SwiftLogTinyStorageLogger(logger))
/// ```
///
/// `fault` and `critical` both map to swift-log's `critical`; the call site inside TinyStorage
/// becomes the record's source location.
public struct SwiftLogTinyStorageLogger: TinyStorageLogging, Sendable {
    /// The swift-log logger messages go to.
    public let logger: Logger
    /// The `source` each message carries: swift-log's default, the module name `TinyStorage`,
    /// except under the default logger, whose label already says it.
    private let source: String

    /// Logs to `logger`, at the levels `logger.logLevel` lets through.
    public init(_ logger: Logger) {
        self.logger = logger
        source = logger.label == Self.defaultLabel ? "storage" : "TinyStorage"
    }

    /// Logs to a logger labelled `"TinyStorage"` that lets warnings and more severe messages
    /// through: failures and damage, never the routine information (a migration's counts, a type
    /// upgrade, a recovered interrupted write) a library should not print into an app's output.
    ///
    /// Where that logger writes is swift-log's choice: the handler an app set up with
    /// `LoggingSystem.bootstrap(_:)`, or standard error when it set up none. Its messages carry
    /// the source `storage`, the category the `os.Logger` one uses on Apple platforms.
    public init() {
        var logger = Logger(label: Self.defaultLabel)
        logger.logLevel = .warning
        self.init(logger)
    }

    static let defaultLabel = "TinyStorage"

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
        logger.log(
            level: mapped, "\(message)", source: source, file: file, function: function, line: UInt(line))
    }
}
