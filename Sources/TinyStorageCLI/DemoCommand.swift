// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import ArgumentParser
import Foundation
import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `tinystorage demo [--keep]`
struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Show, in a temporary directory, what TinyStorage guarantees.",
        discussion: """
            Runs three short demonstrations with real, separate processes (copies of this \
            executable), explaining each step:

              1. A value survives a restart: one process stores it, a new process
                 reads it.
              2. Two processes increment one counter 500 times each at the same
                 time; the counter ends at exactly 1000.
              3. An unreadable file is not an empty store: while the data file
                 cannot be read, an app that reads the streak (or 0), adds 1 and
                 stores it is refused, the store says why, and once the file is
                 readable again it still holds 364.

            Demonstration 3 makes the file unreadable with chmod 000. Root can read any file, so \
            when run as root the app runs as the user nobody through setpriv(1), and the \
            demonstration is skipped if setpriv is missing. Takes about a second; touches nothing \
            outside the temporary directory, which is deleted at the end (kept with --keep).

            Exits with 0 when every demonstration passed (or was skipped), and 70 when one failed.

            EXAMPLE:
              tinystorage demo
            """
    )

    @Flag(help: "Keep the temporary directory and print its path, to look at the stores afterwards.")
    var keep = false

    func run() throws {
        let started = ContinuousClock.now
        let root: URL
        do {
            root = try Self.makeTemporaryDirectory()
        } catch {
            Console.error("cannot create a temporary directory for the demo: \(error.localizedDescription)")
            throw ExitCode(CLIError.Kind.writeFailed.rawValue)
        }
        defer { if !keep { try? FileManager.default.removeItem(at: root) } }
        say("TinyStorage demo, in \(root.path)\n")
        let demo = Demonstrations(root: root, executable: ChildProcess.currentExecutable, say: say)
        let outcomes = [
            demo.run("1. A value survives a restart", demo.valueSurvivesRestart),
            demo.run("2. Two processes increment one counter, 500 times each", demo.countersLoseNoStep),
            demo.run("3. An unreadable file is not an empty store", demo.unreadableFileIsNotEmpty),
        ]
        let passed = outcomes.filter { if case .passed = $0 { true } else { false } }.count
        let skipped = outcomes.count - passed - outcomes.filter { if case .failed = $0 { true } else { false } }.count
        let elapsed = (ContinuousClock.now - started).components
        let seconds = String(format: "%.1f s", Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18)
        if passed == outcomes.count {
            say("All 3 demonstrations passed, in \(seconds).")
        } else {
            say(
                "\(passed) of 3 demonstrations passed, \(skipped) skipped, \(outcomes.count - passed - skipped) failed, in \(seconds)."
            )
        }
        if keep { say("The stores are in \(root.path).") }
        if outcomes.contains(where: { if case .failed = $0 { true } else { false } }) {
            throw ExitCode(Self.failureExitCode)
        }
    }

    /// The exit code when a demonstration did not show what it should (`EX_SOFTWARE`).
    static let failureExitCode: Int32 = 70

    private func say(_ line: String) {
        Console.write(line + "\n")
    }

    private static func makeTemporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("tinystorage-demo-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(
            at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return url
    }
}

#endif
