// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import ArgumentParser
import Foundation
import TinyStorage

/// `tinystorage demo-child <step> <store-dir> …`: the other processes of `tinystorage demo`.
///
/// Hidden from the help: it exists so the demo can start real, separate processes of the same
/// executable. Each step prints `name=value` lines for the demo to read.
struct DemoChildCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo-child",
        abstract: "One process of `tinystorage demo` (used by the demo itself).",
        shouldDisplay: false
    )

    enum Step: String, ExpressibleByArgument {
        /// Opens the store and prints `value=<JSON>` for the key (`value=nil` when absent).
        case read
        /// Waits for a line on standard input, then increments the key `times` times.
        case increment
        /// The app from the reliability story: `retrieve(Int) ?? 0`, then `store(s + 1)`.
        case streak
    }

    @Argument var step: Step
    @Argument var storeDirectory: String
    @Argument var key: String
    @Argument var times = 1

    func run() throws {
        let url = URL(fileURLWithPath: storeDirectory).standardizedFileURL
        let logger = CollectingLogger()
        let storage = TinyStorage(
            insideDirectory: url.deletingLastPathComponent(), name: url.lastPathComponent, logger: logger)
        switch step {
        case .read:
            let value = try? storage.rawValue(forKey: key)
            emit("value=\(value.map { String(decoding: $0.bytes, as: UTF8.self) } ?? "nil")")
        case .increment:
            _ = readLine()
            var failures = 0
            var last = 0
            for _ in 0..<times {
                let value = storage.incrementInteger(forKey: key)
                if value == TinyStorage.incrementFailed { failures += 1 } else { last = value }
            }
            emit("failures=\(failures)")
            emit("last=\(last)")
        case .streak:
            // Exactly what an app does, and what resets streaks with UserDefaults.
            let streak = storage.retrieve(type: Int.self, forKey: key) ?? 0
            storage.store(streak + 1, forKey: key)
            emit("computed=\(streak + 1)")
            switch storage.availability {
            case .available:
                emit("availability=available")
            case .unavailable(let error):
                emit("availability=unavailable (\(error.code)): \(error.message)")
            }
            emit("logged=\(logger.messages.first ?? "")")
        }
    }
}

/// Writes one `name=value` line at once (unbuffered), so the demo sees it even if the process dies.
private func emit(_ line: String) {
    Console.write(line + "\n")
}

/// Keeps what the library logs, so the demo can show it instead of printing it raw.
final class CollectingLogger: TinyStorageLogging, @unchecked Sendable {
    // NB: @unchecked because `messages` is guarded by `lock`.
    private let lock = NSLock()
    private var stored: [String] = []

    var messages: [String] { lock.withLock { stored } }

    func log(_ level: TinyStorageLogLevel, _ message: String, file: String, function: String, line: Int) {
        guard level > .debug else { return }
        lock.withLock { stored.append(message) }
    }
}

#endif
