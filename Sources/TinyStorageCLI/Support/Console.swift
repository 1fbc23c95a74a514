// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import Foundation
import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Standard output for data, standard error for everything else.
enum Console {
    /// The exit code when standard output cannot be written: `EX_IOERR` (sysexits.h), listed in
    /// the root command's help.
    static let outputFailedExitCode: Int32 = 74

    /// Writes `text` to standard output as is.
    static func write(_ text: String) {
        write(Data(text.utf8))
    }

    /// Writes `data` to standard output byte for byte.
    ///
    /// When it cannot (a full disk, a closed pipe while `SIGPIPE` is ignored), says so in one
    /// `error:` line and exits with ``outputFailedExitCode``: what was printed may be cut short,
    /// and a script must not take it for the whole answer. With `SIGPIPE` at its default, a
    /// closed pipe ends the process as it ends `cat`.
    static func write(_ data: Data) {
        do {
            try FileHandle.standardOutput.write(contentsOf: data)
        } catch {
            Self.error("cannot write to standard output: \(systemReason(error)). What was printed is incomplete.")
            exit(outputFailedExitCode)
        }
    }

    /// The system's words for why `error` happened (`strerror(3)` of its POSIX code), or its
    /// description when it carries none.
    private static func systemReason(_ error: any Error) -> String {
        var current = error as NSError
        for _ in 0..<4 {  // NB: Foundation wraps the POSIX error once or twice
            if current.domain == NSPOSIXErrorDomain, let text = strerror(Int32(current.code)) {
                return String(cString: text)
            }
            guard let underlying = current.userInfo[NSUnderlyingErrorKey] as? NSError else { break }
            current = underlying
        }
        return "\(error)"
    }

    /// Writes `error: <message>` and a newline to standard error.
    static func error(_ message: String) {
        note(message, prefix: "error")
    }

    /// Writes `<prefix>: <message>` and a newline to standard error.
    ///
    /// NB: a failure to write to standard error is ignored: there is nowhere left to say so.
    static func note(_ message: String, prefix: String) {
        try? FileHandle.standardError.write(contentsOf: Data("\(prefix): \(message)\n".utf8))
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
