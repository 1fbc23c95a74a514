// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import Foundation

/// Runs another copy of this executable, as the demo's "other process" or "restarted app".
struct ChildProcess {
    /// What a finished child printed and how it ended.
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String

        /// The value of the first `name=value` line, or `nil`.
        func field(_ name: String) -> String? {
            stdout.split(separator: "\n").first { $0.hasPrefix(name + "=") }.map {
                String($0.dropFirst(name.count + 1))
            }
        }
    }

    /// This executable's path: `/proc/self/exe` on Linux, else what the system reports.
    static var currentExecutable: String {
        if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") { return path }
        return Bundle.main.executablePath ?? CommandLine.arguments[0]
    }

    private let process = Process()
    private let output = Pipe()
    private let errors = Pipe()
    private let input = Pipe()

    /// Starts `executable arguments…` in `directory`. The child's standard input stays open
    /// until ``release()``, so a child can wait for a signal to begin.
    init(_ executable: String, _ arguments: [String], in directory: URL) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = input
        try process.run()
    }

    var processIdentifier: Int32 { process.processIdentifier }

    /// Sends the child a line on its standard input and closes it.
    func release() {
        input.fileHandleForWriting.write(Data("go\n".utf8))
        try? input.fileHandleForWriting.close()
    }

    /// Waits for the child to exit and collects what it printed.
    func finish() -> Result {
        try? input.fileHandleForWriting.close()
        // NB: the children print a few lines, far below a pipe's buffer, so reading after the
        // exit cannot deadlock; stdout is read first and to its end, which is the exit anyway.
        let stdout = output.fileHandleForReading.readDataToEndOfFile()
        let stderr = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
            stderr: String(decoding: stderr, as: UTF8.self))
    }

    /// Runs a child to the end.
    static func run(_ executable: String, _ arguments: [String], in directory: URL) throws -> Result {
        try ChildProcess(executable, arguments, in: directory).finish()
    }
}

#endif
