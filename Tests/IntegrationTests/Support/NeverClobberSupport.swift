import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs the test helper as the unprivileged user `nobody` through `setpriv(1)`, so that file
/// permissions apply to it: the tests run as root in CI, and root reads every file.
enum Unprivileged {
    static let setpriv = "/usr/bin/setpriv"

    /// Why the tests that need it cannot run here, or `nil` when they can.
    static let unsupportedReason: String? = {
        if getuid() != 0 { return "needs root, to hand files to and run the helper as `nobody`" }
        if !FileManager.default.isExecutableFile(atPath: setpriv) { return "needs \(setpriv) (util-linux)" }
        if nobody == nil { return "needs the user nobody and group nogroup" }
        if case .failure(let missing) = Helper.location { return missing.description }
        return nil
    }()

    static var isSupported: Bool { unsupportedReason == nil }

    /// `nobody`'s user ID and `nogroup`'s group ID, looked up once.
    static let nobody = lookUpIDs(user: "nobody", group: "nogroup")

    /// Gives `directory` and everything in it to `nobody`, as an app's store belongs to the app's user.
    static func handOver(_ directory: URL) throws {
        guard let nobody else { throw POSIXError(.ENOENT) }
        try changeOwner(of: directory, to: nobody.user, nobody.group)
    }

    /// Gives `directory` and everything in it back to this process's user.
    static func handBack(_ directory: URL) throws {
        try changeOwner(of: directory, to: getuid(), getgid())
    }

    private static func changeOwner(of directory: URL, to user: uid_t, _ group: gid_t) throws {
        var paths = [directory.path]
        let enumerator = FileManager.default.enumerator(atPath: directory.path)
        while let relative = enumerator?.nextObject() as? String {
            paths.append(directory.appendingPathComponent(relative).path)
        }
        for path in paths where lchown(path, user, group) != 0 {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
    }

    /// The arguments that make `setpriv` run the helper with `arguments` as `nobody`.
    static func command(_ arguments: [String]) throws -> [String] {
        let helper = try Helper.location.get()
        return ["--reuid=nobody", "--regid=nogroup", "--clear-groups", helper.path] + arguments
    }
}

/// One helper process running as `nobody`, its standard output read line by line.
///
/// Standard error goes to a temporary file, shown when something fails. A helper still running
/// when this object goes away is killed, so a failing test never leaves a process behind.
final class UnprivilegedHelperProcess {
    private let process = Process()
    private let outputHandle: FileHandle
    private let errorFile: URL
    private var buffer: [UInt8] = []
    private var reachedEnd = false
    private let input: FileHandle?

    /// Starts the helper as `nobody` with `arguments`; with `withInput`, its standard input is a
    /// pipe that ``send(_:)`` writes to.
    init(_ arguments: [String], withInput: Bool = false) throws {
        process.executableURL = URL(fileURLWithPath: Unprivileged.setpriv)
        process.arguments = try Unprivileged.command(arguments)
        let outputPipe = Pipe()
        process.standardOutput = outputPipe
        if withInput {
            let inputPipe = Pipe()
            process.standardInput = inputPipe
            input = inputPipe.fileHandleForWriting
        } else {
            process.standardInput = FileHandle.nullDevice
            input = nil
        }
        errorFile = FileManager.default.temporaryDirectory.appendingPathComponent("nobody-\(UUID().uuidString).err")
        try Data().write(to: errorFile)
        process.standardError = try FileHandle(forWritingTo: errorFile)
        outputHandle = outputPipe.fileHandleForReading
        try process.run()
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: errorFile)
    }

    /// What the helper wrote to standard error so far.
    var errorOutput: String { (try? String(contentsOf: errorFile, encoding: .utf8)) ?? "" }

    /// Writes `line` and a newline to the helper's standard input (started `withInput`).
    func send(_ line: String) {
        try? input?.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Closes the helper's standard input: helpers that read it exit.
    func closeInput() {
        try? input?.close()
    }

    /// The next complete line of standard output, waiting for it; `nil` once the helper closed
    /// its output and no complete line is left.
    func readLine() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            if reachedEnd { return nil }
            var chunk = [UInt8](repeating: 0, count: 16 << 10)
            let fd = outputHandle.fileDescriptor
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                buffer += chunk[..<count]
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                reachedEnd = true
            }
        }
    }

    /// Reads lines up to and including `marker` (which is not returned), or to the end of output.
    func readLines(through marker: String) -> [String] {
        var lines: [String] = []
        while let line = readLine(), line != marker { lines.append(line) }
        return lines
    }

    /// Reads every remaining line, then waits for the exit status.
    func finish() -> (status: Int32, output: [String]) {
        var lines: [String] = []
        while let line = readLine() { lines.append(line) }
        process.waitUntilExit()
        let status = process.terminationReason == .exit ? process.terminationStatus : -process.terminationStatus
        return (status, lines)
    }

    /// Runs the helper as `nobody` to completion.
    static func run(_ arguments: [String]) throws -> (status: Int32, output: [String], errors: String) {
        let helper = try UnprivilegedHelperProcess(arguments)
        let (status, output) = helper.finish()
        return (status, output, helper.errorOutput)
    }
}

/// Everything about the files below a directory that a careless writer could change: names, kinds,
/// permissions, owners and bytes (the lock file's bytes excepted: they are shared memory).
struct DirectorySnapshot: Equatable, CustomStringConvertible {
    struct Entry: Equatable {
        var mode: UInt32
        var owner: UInt32
        var contents: Data?
    }

    var entries: [String: Entry]

    init(_ directory: URL) throws {
        entries = [:]
        let enumerator = FileManager.default.enumerator(atPath: directory.path)
        while let relative = enumerator?.nextObject() as? String {
            let path = directory.appendingPathComponent(relative).path
            var info = stat()
            guard lstat(path, &info) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            // NB: a lock file's bytes are memory the processes using the store share, not data.
            let isFile = (info.st_mode & S_IFMT) == S_IFREG && !relative.hasSuffix("store.lock")
            entries[relative] = Entry(
                mode: UInt32(info.st_mode), owner: UInt32(info.st_uid),
                contents: isFile ? try Data(contentsOf: URL(fileURLWithPath: path)) : nil)
        }
    }

    var description: String {
        entries.keys.sorted().map { key in
            let entry = entries[key]
            return "\(key) mode \(String(entry?.mode ?? 0, radix: 8)) uid \(entry?.owner ?? 0) "
                + "\(entry?.contents?.count ?? -1) bytes"
        }.joined(separator: "; ")
    }
}

/// Sets the permission bits of `url` (`chmod(2)`).
func setPermissions(_ url: URL, _ mode: mode_t) throws {
    guard chmod(url.path, mode) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
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
