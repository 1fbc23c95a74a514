// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import Foundation
import TinyStorage

/// Standard output for data, standard error for everything else.
enum Console {
    /// Writes `text` to standard output as is.
    static func write(_ text: String) {
        write(Data(text.utf8))
    }

    /// Writes `data` to standard output byte for byte.
    static func write(_ data: Data) {
        FileHandle.standardOutput.write(data)
    }

    /// Writes `error: <message>` and a newline to standard error.
    static func error(_ message: String) {
        FileHandle.standardError.write(Data("error: \(message)\n".utf8))
    }

    /// Writes `<prefix>: <message>` and a newline to standard error.
    static func note(_ message: String, prefix: String) {
        FileHandle.standardError.write(Data("\(prefix): \(message)\n".utf8))
    }
}

/// Passes TinyStorage's warnings on to standard error.
///
/// Errors are not repeated: every error the library logs is either thrown, and the command
/// reports it once as its own `error:` line with an exit code, or a recovery, which
/// ``StoreDirectory`` prints from the store's `recoveryReports`, whatever level it was logged at.
/// Informational and debug messages are dropped.
struct ConsoleLogger: TinyStorageLogging {
    func log(_ level: TinyStorageLogLevel, _ message: String, file: String, function: String, line: Int) {
        if level == .warning { Console.note(message, prefix: "warning") }
    }
}

#endif
