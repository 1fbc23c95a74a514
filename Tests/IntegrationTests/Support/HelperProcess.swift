import Foundation
import Testing
import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The `TinyStorageTestHelper` executable: another process using the same store.
///
/// SwiftPM builds it next to the test bundle (`.build/<triple>/debug/`), because the test target
/// depends on it. It is looked up from the running test binary's directory, upward.
enum Helper {
    static let name = "TinyStorageTestHelper"

    struct Missing: Error, CustomStringConvertible {
        var searched: [String]
        var description: String {
            "\(Helper.name) was not found next to the test binary (searched \(searched.joined(separator: ", "))). "
                + "Build it with `swift build --build-tests` (the IntegrationTests target depends on it)."
        }
    }

    /// The helper's location, or an error naming the places searched.
    static let location: Result<URL, Missing> = {
        var starts: [URL] = []
        if let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            starts.append(URL(fileURLWithPath: executable).deletingLastPathComponent())
        }
        if let first = CommandLine.arguments.first {
            starts.append(URL(fileURLWithPath: first).standardizedFileURL.deletingLastPathComponent())
        }
        starts.append(Bundle.main.bundleURL)
        starts.append(Bundle.main.bundleURL.deletingLastPathComponent())
        // NB: on macOS `swift test` runs Swift Testing in the toolchain's swiftpm-testing-helper, so
        // neither argv[0] nor the main bundle is in the build folder; the bundle holding this
        // class's code (the .xctest bundle) is, and so is the helper beside it.
        starts.append(Bundle(for: HelperProcess.self).bundleURL.deletingLastPathComponent())
        for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
            starts.append(bundle.bundleURL.deletingLastPathComponent())
        }
        var searched: [String] = []
        for start in starts {
            var directory = start
            for _ in 0..<4 {
                for candidate in [directory, directory.appendingPathComponent("debug")] {
                    let url = candidate.appendingPathComponent(name)
                    searched.append(candidate.path)
                    if FileManager.default.isExecutableFile(atPath: url.path) { return .success(url) }
                }
                directory = directory.deletingLastPathComponent()
            }
        }
        return .failure(Missing(searched: Array(NSOrderedSet(array: searched)).compactMap { $0 as? String }))
    }()

    /// Runs the helper to completion.
    /// - Returns: its exit status and what it printed.
    static func run(_ arguments: [String]) throws -> (status: Int32, output: [String], errors: String) {
        let process = try HelperProcess(arguments)
        var output: [String] = []
        while let line = process.readLine() { output.append(line) }
        let status = process.waitForExit()
        return (status, output, process.errorOutput)
    }
}

/// One running helper process, with its standard output read line by line.
///
/// Standard error goes to a temporary file (never a pipe nobody reads, which could block the
/// child), shown when something fails. A helper still running when this object goes away is
/// killed, so a failing test never leaves a writer behind.
final class HelperProcess {
    let process = Process()
    private let output: Int32
    private let input: FileHandle?
    private let errorFile: URL
    private var buffer: [UInt8] = []
    private var reachedEnd = false

    /// Starts the helper with `arguments`; with `withInput`, its standard input is a pipe that
    /// ``send(_:)`` writes to.
    init(_ arguments: [String], withInput: Bool = false) throws {
        process.executableURL = try Helper.location.get()
        process.arguments = arguments
        let outputPipe = Pipe()
        process.standardOutput = outputPipe
        errorFile = FileManager.default.temporaryDirectory.appendingPathComponent("helper-\(UUID().uuidString).err")
        try Data().write(to: errorFile)
        process.standardError = try FileHandle(forWritingTo: errorFile)
        if withInput {
            let inputPipe = Pipe()
            process.standardInput = inputPipe
            input = inputPipe.fileHandleForWriting
        } else {
            process.standardInput = FileHandle.nullDevice
            input = nil
        }
        output = outputPipe.fileHandleForReading.fileDescriptor
        // NB: the pipe owns the descriptor; keep it alive as long as this object.
        outputHandle = outputPipe.fileHandleForReading
        try process.run()
    }

    private let outputHandle: FileHandle

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: errorFile)
    }

    /// Everything the helper wrote to standard error so far.
    var errorOutput: String {
        (try? String(contentsOf: errorFile, encoding: .utf8)) ?? ""
    }

    /// The next complete line of standard output, waiting for it; `nil` once the helper closed its
    /// output (it exited) and no complete line is left.
    func readLine() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            if reachedEnd { return nil }
            var chunk = [UInt8](repeating: 0, count: 64 << 10)
            let count = chunk.withUnsafeMutableBytes { read(output, $0.baseAddress, $0.count) }
            if count > 0 {
                buffer += chunk[..<count]
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                // End of file, or an empty pipe after `killHard()` made reads non-blocking. A
                // partial last line (the helper died mid-write) is not a line.
                reachedEnd = true
            }
        }
    }

    /// Writes `line` and a newline to the helper's standard input.
    func send(_ line: String) throws {
        try input?.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Kills the helper with SIGKILL, waits for it, and returns the complete lines it had written
    /// that were not read yet.
    func killHard() -> [String] {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        // NB: the helper is gone, so every byte it wrote is already in the pipe: read without
        // blocking until the pipe is empty (a stray copy of the write end elsewhere cannot hang us).
        _ = fcntl(output, F_SETFL, fcntl(output, F_GETFL) | O_NONBLOCK)
        var lines: [String] = []
        while let line = readLine() { lines.append(line) }
        return lines
    }

    /// Waits for the helper to exit and returns its exit status (or the signal that ended it, negated).
    @discardableResult
    func waitForExit() -> Int32 {
        process.waitUntilExit()
        return process.terminationReason == .exit ? process.terminationStatus : -process.terminationStatus
    }
}

/// Runs `body` with a fresh, empty directory that is deleted afterwards.
func withTemporaryDirectory<R>(_ body: (URL) throws -> R) throws -> R {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("TinyStorageIntegrationTests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try body(directory)
}

/// Keeps the store's log messages so a failing test can show them.
final class CollectingLogger: TinyStorageLogging, @unchecked Sendable {
    // @unchecked: `messages` is only touched while holding `lock`.
    private let lock = NSLock()
    private var messages: [String] = []

    func log(_ level: TinyStorageLogLevel, _ message: String, file: String, function: String, line: Int) {
        lock.lock()
        defer { lock.unlock() }
        messages.append("[\(level)] \(message)")
    }

    var all: [String] {
        lock.lock()
        defer { lock.unlock() }
        return messages
    }
}

/// Opens the store `name` inside `directory` through the public API.
func openStore(_ directory: URL, name: String = "store", logger: CollectingLogger = CollectingLogger()) -> TinyStorage {
    TinyStorage(insideDirectory: directory, name: name, logger: logger)
}

/// The size of the file at `url`.
func fileSize(_ url: URL) throws -> Int {
    var info = stat()
    guard stat(url.path, &info) == 0 else { throw CocoaError(.fileReadNoSuchFile) }
    return Int(info.st_size)
}

/// Where the log in the data file at `url` ends (see `LogFormat.framesEnd(of:)`): on Linux a data
/// file goes on past its log, with space allocated ahead.
func committedLength(_ url: URL) throws -> Int {
    LogFormat.framesEnd(of: [UInt8](try Data(contentsOf: url)))
}

/// The generation number in the data file's header (bytes 16..<24, little-endian), bumped by
/// every compaction.
func headerGeneration(_ url: URL) throws -> UInt64 {
    let bytes = try Data(contentsOf: url)
    guard bytes.count >= 24 else { return 0 }
    return bytes[16..<24].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
}
