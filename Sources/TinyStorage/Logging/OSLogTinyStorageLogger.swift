#if canImport(os)
import os

/// Sends TinyStorage's messages to the unified logging system; the default on Apple platforms.
///
/// Messages appear in Console.app under the given subsystem and category. `trace` is logged as
/// debug, `notice` and `warning` at the default level, `fault` and `critical` as faults.
public struct OSLogTinyStorageLogger: TinyStorageLogging, Sendable {
    private let logger: os.Logger

    /// Logs under `subsystem` and `category`.
    public init(subsystem: String = "TinyStorage", category: String = "storage") {
        logger = os.Logger(subsystem: subsystem, category: category)
    }

    public func log(_ level: TinyStorageLogLevel, _ message: String, file: String, function: String, line: Int) {
        let type: OSLogType =
            switch level {
            case .trace, .debug: .debug
            case .info: .info
            case .notice, .warning: .default
            case .error: .error
            case .fault, .critical: .fault
            }
        // Messages never contain stored values, only keys and paths, so they may be public.
        logger.log(level: type, "\(message, privacy: .public)")
    }
}
#endif
