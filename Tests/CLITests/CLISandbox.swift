import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What one run of the `tinystorage` executable produced.
struct CLIResult {
    var status: Int32
    var stdout: Data
    var stderr: String

    var output: String { String(decoding: stdout, as: UTF8.self) }
}

/// A temporary directory per test, and the built `tinystorage` executable run inside it with
/// Foundation's `Process`, as a user would run it.
///
/// Stores and other test files go in ``root`` (also the working directory of every run); the
/// captured output goes to a sibling folder, so it never shows up in a snapshot of ``root``.
final class CLISandbox {
    let root: URL
    private let base: URL
    private var runs = 0

    init() throws {
        base = FileManager.default.temporaryDirectory
            .appendingPathComponent("tinystorage-cli-tests-\(UUID().uuidString)", isDirectory: true)
        root = base.appendingPathComponent("work", isDirectory: true)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(
            at: base.appendingPathComponent("io", isDirectory: true), withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: base) }

    /// `root/name`, which this method does not create.
    func path(_ name: String) -> String { root.appendingPathComponent(name).path }

    // MARK: Running

    /// The built `tinystorage`, found beside the test bundle; `nil` when it was not built.
    static let executable: URL? = {
        var directories: [URL] = []
        if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            directories.append(URL(fileURLWithPath: path).deletingLastPathComponent())
        }
        directories.append(Bundle.main.bundleURL)
        directories.append(Bundle.main.bundleURL.deletingLastPathComponent())
        // NB: the .xctest bundle, beside `tinystorage`, when the runner lives elsewhere (macOS).
        directories.append(Bundle(for: CLISandbox.self).bundleURL.deletingLastPathComponent())
        for bundle in Bundle.allBundles where bundle.bundleURL.pathExtension == "xctest" {
            directories.append(bundle.bundleURL.deletingLastPathComponent())
        }
        return directories.map { $0.appendingPathComponent("tinystorage") }
            .first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }()

    /// Runs `tinystorage arguments…`, feeding `stdin` (or nothing) to its standard input.
    @discardableResult
    func run(_ arguments: String..., stdin: Data? = nil) throws -> CLIResult {
        try run(arguments, stdin: stdin)
    }

    @discardableResult
    func run(_ arguments: [String], stdin: Data? = nil, environment: [String: String] = [:]) throws -> CLIResult {
        let executable = try #require(
            Self.executable,
            "The `tinystorage` executable was not found beside the test bundle; build it with `swift build`.")
        return try launch(executable, arguments, stdin: stdin, environment: environment)
    }

    /// Starts `tinystorage arguments…` and returns at once, for commands that run until stopped.
    func start(_ arguments: String...) throws -> CLIProcess {
        let executable = try #require(Self.executable, "The `tinystorage` executable was not found.")
        return try CLIProcess(executable, arguments, in: root)
    }

    /// Runs `tinystorage arguments…` through `/bin/sh` after `prelude` (such as a `ulimit`).
    func run(after prelude: String, _ arguments: String...) throws -> CLIResult {
        try run(after: prelude, arguments: arguments)
    }

    func run(after prelude: String, arguments: [String]) throws -> CLIResult {
        let executable = try #require(Self.executable, "The `tinystorage` executable was not found.")
        let script = "\(prelude); exec \"$0\" \"$@\""
        return try launch(URL(fileURLWithPath: "/bin/sh"), ["-c", script, executable.path] + arguments, stdin: nil)
    }

    /// Runs `tinystorage arguments…` as the unprivileged user `nobody`, through `setpriv(1)`, so
    /// file permissions apply to it: the tests run as root in CI, and root may read and write
    /// every file. See ``nobodyUnavailable`` for where this cannot run.
    func runAsNobody(_ arguments: String...) throws -> CLIResult {
        try runAsNobody(arguments: arguments)
    }

    func runAsNobody(arguments: [String], stdin: Data? = nil) throws -> CLIResult {
        let executable = try #require(Self.executable, "The `tinystorage` executable was not found.")
        return try launch(
            URL(fileURLWithPath: Self.setpriv),
            ["--reuid=nobody", "--regid=nogroup", "--clear-groups", executable.path] + arguments, stdin: stdin)
    }

    static let setpriv = "/usr/bin/setpriv"

    /// Why ``runAsNobody(_:)`` cannot run here, or `nil` when it can.
    static let nobodyUnavailable: String? = {
        if getuid() != 0 { return "needs root, to hand files to and run tinystorage as `nobody`" }
        if !FileManager.default.isExecutableFile(atPath: setpriv) { return "needs \(setpriv) (util-linux)" }
        if nobody == nil { return "needs the user nobody and group nogroup" }
        return nil
    }()

    /// `nobody`'s user ID and `nogroup`'s group ID, looked up once.
    static let nobody = lookUpIDs(user: "nobody", group: "nogroup")

    /// Gives `path` and everything in it to `nobody`.
    func handToNobody(_ path: String) throws {
        let (user, group) = try #require(Self.nobody)
        var paths = [path]
        let enumerator = FileManager.default.enumerator(atPath: path)
        while let relative = enumerator?.nextObject() as? String { paths.append(path + "/" + relative) }
        for path in paths { try #require(lchown(path, user, group) == 0, "lchown \(path): errno \(errno)") }
    }

    private func launch(
        _ executable: URL, _ arguments: [String], stdin: Data?, environment: [String: String] = [:]
    ) throws -> CLIResult {
        runs += 1
        let io = base.appendingPathComponent("io", isDirectory: true)
        let outURL = io.appendingPathComponent("\(runs).stdout")
        let errURL = io.appendingPathComponent("\(runs).stderr")
        let inURL = io.appendingPathComponent("\(runs).stdin")
        try #require(FileManager.default.createFile(atPath: outURL.path, contents: nil))
        try #require(FileManager.default.createFile(atPath: errURL.path, contents: nil))
        try #require(FileManager.default.createFile(atPath: inURL.path, contents: stdin ?? Data()))
        let out = try FileHandle(forWritingTo: outURL)
        let err = try FileHandle(forWritingTo: errURL)
        let input = try FileHandle(forReadingFrom: inURL)
        defer {
            try? out.close()
            try? err.close()
            try? input.close()
        }

        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.currentDirectoryURL = root
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        try process.run()
        // NB: a guard against a command that never ends (such as `watch` opening a store it
        // should have refused), so the test fails instead of hanging; not a timing assertion.
        if exited.wait(timeout: .now() + 120) == .timedOut {
            process.terminate()
            process.waitUntilExit()
            Issue.record("tinystorage \(arguments.joined(separator: " ")) did not exit within 120 seconds")
        }
        process.waitUntilExit()
        let stderr = String(decoding: try Data(contentsOf: errURL), as: UTF8.self)
        #expect(
            process.terminationReason == .exit,
            "tinystorage \(arguments.joined(separator: " ")) was killed by signal \(process.terminationStatus): \(stderr)"
        )
        return CLIResult(status: process.terminationStatus, stdout: try Data(contentsOf: outURL), stderr: stderr)
    }

    // MARK: Inspecting

    /// Every file and folder under `path`, relative, with file contents; empty when nothing is there.
    ///
    /// NB: a lock file (`store.lock`) is listed by name only: its page is memory the processes
    /// using the store share (change signals, flush marks), not data.
    func snapshot(_ path: String) -> [String: Data] {
        var result: [String: Data] = [:]
        guard let enumerator = FileManager.default.enumerator(atPath: path) else { return result }
        while let relative = enumerator.nextObject() as? String {
            let isLockFile = relative.hasSuffix("store.lock")
            result[relative] =
                isLockFile
                ? Data("<lock file>".utf8)
                : FileManager.default.contents(atPath: path + "/" + relative) ?? Data("<dir>".utf8)
        }
        return result
    }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// The data file's bytes of the store at `path`.
    func dataFile(_ path: String) -> Data? { FileManager.default.contents(atPath: path + "/store.tinystorage") }
}

extension CLIResult {
    /// Checks a failure: the exit code, one `error:` line on stderr containing `message`, no output.
    func expectFailure(
        _ code: Int32, _ message: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(status == code, "exit code; stderr: \(stderr)", sourceLocation: sourceLocation)
        let lines = stderr.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(lines.count == 1, "one line on stderr, got: \(stderr)", sourceLocation: sourceLocation)
        #expect(stderr.hasPrefix("error: "), "stderr: \(stderr)", sourceLocation: sourceLocation)
        #expect(stderr.contains(message), "stderr: \(stderr)", sourceLocation: sourceLocation)
        #expect(output.isEmpty, "stdout: \(output)", sourceLocation: sourceLocation)
    }

    /// Checks a success: exit code 0 and nothing on stderr.
    func expectSuccess(sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(status == 0, "exit code; stderr: \(stderr)", sourceLocation: sourceLocation)
        #expect(stderr.isEmpty, "stderr: \(stderr)", sourceLocation: sourceLocation)
    }
}

// MARK: Data files

/// Data-file surgery for tests of damaged and foreign stores.
enum DataFileBytes {
    /// The size of the header this TinyStorage writes (format version 2); records follow it.
    static let headerSize = 64

    /// `header` (a store's first 64 bytes) with its format version set to `version` and its
    /// checksum recomputed: the file of a newer TinyStorage, which this one must refuse untouched.
    static func header(_ header: Data, withVersion version: UInt32) -> Data {
        var bytes = [UInt8](header.prefix(headerSize))
        withUnsafeBytes(of: version.littleEndian) { bytes.replaceSubrange(8..<12, with: $0) }
        withUnsafeBytes(of: crc32c(bytes[0..<36]).littleEndian) { bytes.replaceSubrange(36..<40, with: $0) }
        return Data(bytes)
    }

    /// CRC-32C (Castagnoli), the checksum of the data file's header and records.
    static func crc32c(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
        }
        return ~crc
    }

    /// The offset just past the last record: the file without the zeros reserved after it.
    static func logicalEnd(_ data: Data) -> Int {
        (data.lastIndex { $0 != 0 } ?? -1) + 1
    }
}

/// The IDs of user `user` and group `group`, looked up with the reentrant calls: `getpwnam` and
/// `getgrnam` answer in a buffer every thread shares, which tests running in parallel (and
/// Foundation, naming a file's owner) overwrite, so a user ID read from it could be another's.
func lookUpIDs(user userName: String, group groupName: String) -> (user: uid_t, group: gid_t)? {
    var buffer = [CChar](repeating: 0, count: 16_384)
    var userEntry = passwd()
    var userResult: UnsafeMutablePointer<passwd>?
    guard getpwnam_r(userName, &userEntry, &buffer, buffer.count, &userResult) == 0, userResult != nil else {
        return nil
    }
    let userID = userEntry.pw_uid
    var groupEntry = group()
    var groupResult: UnsafeMutablePointer<group>?
    guard getgrnam_r(groupName, &groupEntry, &buffer, buffer.count, &groupResult) == 0, groupResult != nil else {
        return nil
    }
    return (userID, groupEntry.gr_gid)
}
