#if canImport(os)
import os

/// Sends TinyStorage's messages to the unified logging system; the default on Apple platforms.
///
/// Messages appear in Console.app under the given subsystem and category.
public struct OSLogTinyStorageLogger: TinyStorageLogging {
    private let logger: os.Logger

    /// Logs under `subsystem` and `category`.
    public init(subsystem: String = "TinyStorage", category: String = "storage") {
        logger = os.Logger(subsystem: subsystem, category: category)
    }

    public func log(_ message: String, level: TinyStorageLogLevel) {
        let type: OSLogType =
            switch level {
            case .debug: .debug
            case .info: .info
            case .warning: .default
            case .error: .error
            }
        // Messages never contain stored values, only keys and paths, so they may be public.
        logger.log(level: type, "\(message, privacy: .public)")
    }
}
#endif
