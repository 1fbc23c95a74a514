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

/// The three demonstrations of `tinystorage demo`, each with real processes.
struct Demonstrations {
    enum Outcome {
        case passed
        case skipped
        case failed
    }

    /// A demonstration that did not show what it should, with what happened instead.
    struct Failure: Error {
        let message: String
        init(_ message: String) { self.message = message }
    }

    /// A demonstration that cannot run here, and why.
    struct Skip: Error {
        let reason: String
    }

    let root: URL
    let executable: String
    let say: (String) -> Void

    /// Prints the title, runs `body`, and prints its verdict.
    func run(_ title: String, _ body: () throws -> String) -> Outcome {
        say(title)
        defer { say("") }
        do {
            let verdict = try body()
            say("   PASSED: \(verdict)")
            return .passed
        } catch let skip as Skip {
            say("   SKIPPED: \(skip.reason)")
            return .skipped
        } catch let failure as Failure {
            say("   FAILED: \(failure.message)")
            return .failed
        } catch {
            say("   FAILED: \(error)")
            return .failed
        }
    }

    // MARK: 1. Restart

    func valueSurvivesRestart() throws -> String {
        let storage = open("restart")
        let greeting = "Hello from process \(getpid())"
        try storage.storeOrThrow(greeting, forKey: "greeting")
        say("   This process (pid \(getpid())) stores greeting = \"\(greeting)\" and lets go of the store.")
        let child = try ChildProcess(
            executable, ["demo-child", "read", storage.directoryURL.path, "greeting"], in: root)
        let result = child.finish()
        let read = try field("value", of: result, from: "the new process")
        say(
            "   A new process (pid \(child.processIdentifier)), like the app after a restart, opens the store and reads: \(read)"
        )
        guard read == JSONText.quoted(greeting) else { throw Failure("the new process read \(read)") }
        return "the value was there after the restart."
    }

    // MARK: 2. Two processes, one counter

    func countersLoseNoStep() throws -> String {
        let storage = open("counter")
        try storage.storeOrThrow(0, forKey: "counter")
        let arguments = ["demo-child", "increment", storage.directoryURL.path, "counter", "500"]
        let children = [
            try ChildProcess(executable, arguments, in: root), try ChildProcess(executable, arguments, in: root),
        ]
        say(
            "   Started processes \(children[0].processIdentifier) and \(children[1].processIdentifier); each calls "
                + "incrementInteger(forKey: \"counter\") 500 times, both at once.")
        children.forEach { $0.release() }
        let results = children.map { $0.finish() }
        for result in results {
            let failures = try field("failures", of: result, from: "an incrementing process")
            guard failures == "0" else { throw Failure("a process saw \(failures) increments fail: \(result.stderr)") }
        }
        let total = try storage.retrieveOrThrow(type: Int.self, forKey: "counter")
        say("   Both finished. This process reads counter = \(total.map(String.init) ?? "nil") (expected 1000).")
        guard total == 1000 else { throw Failure("the counter is \(total.map(String.init) ?? "missing"), not 1000") }
        return "no increment was lost."
    }

    // MARK: 3. The unreadable file

    func unreadableFileIsNotEmpty() throws -> String {
        let storage = open("streaks")
        try storage.storeOrThrow(364, forKey: "streak")
        let dataFile = storage.fileURL.path
        let before = try Data(contentsOf: storage.fileURL)
        say("   The store holds streak = 364: a user's 364-day streak.")

        var run = [executable]
        var who = "the app"
        if geteuid() == 0 {
            run = try unprivilegedRunner(storeDirectory: storage.directoryURL)
            who = "the app as the user nobody, the store's owner (root could read any file)"
        }
        let command = run + ["demo-child", "streak", storage.directoryURL.path, "streak"]
        try setPermissions(0o000, dataFile)
        say("   Made the data file unreadable (chmod 000), as on a phone before its first unlock.")
        let result: ChildProcess.Result
        do {
            defer { try? setPermissions(0o600, dataFile) }
            say("   Started \(who), which runs:")
            say("       let streak = storage.retrieve(type: Int.self, forKey: \"streak\") ?? 0")
            say("       storage.store(streak + 1, forKey: \"streak\")")
            result = try ChildProcess.run(command[0], Array(command.dropFirst()), in: root)
        }
        let computed = try field("computed", of: result, from: "the app")
        let availability = try field("availability", of: result, from: "the app")
        say(
            "   retrieve found nothing it could read, so the app computed 0 + 1 = \(computed) and called store(\(computed))."
        )
        say("   The store refused the write. Its availability says why:")
        say("       \(availability)")
        guard availability.hasPrefix("unavailable") else { throw Failure("the store said it was \(availability)") }

        say("   Made the file readable again (chmod 600).")
        guard (try Data(contentsOf: storage.fileURL)) == before else {
            throw Failure("the data file changed while it was unreadable")
        }
        say("   The data file is byte for byte what it was.")
        // NB: as the store's owner: TinyStorage refuses to use a store folder another user owns.
        let reread = try ChildProcess.run(
            run[0], Array(run.dropFirst()) + ["demo-child", "read", storage.directoryURL.path, "streak"], in: root)
        let value = try field("value", of: reread, from: "the new process")
        say("   A new process opens the store and reads streak = \(value).")
        guard value == "364" else { throw Failure("the streak is \(value), not 364") }
        return "the streak is still 364. A store that treated the unreadable file as empty would now hold 1."
    }

    /// The command line that runs this executable as the user nobody through `setpriv`, as the
    /// owner of the store: a copy of this executable it may run, a temporary directory it may pass
    /// through, and the store's folder and files handed over to it.
    private func unprivilegedRunner(storeDirectory: URL) throws -> [String] {
        guard
            let setpriv = ["/usr/bin/setpriv", "/bin/setpriv", "/usr/sbin/setpriv"].first(where: {
                FileManager.default.isExecutableFile(atPath: $0)
            })
        else {
            throw Skip(
                reason: "running as root, which can read any file, and setpriv (util-linux) is not installed to "
                    + "run the app as another user. Run the demo as a normal user, or install util-linux.")
        }
        guard let nobody = getpwnam("nobody") else {
            throw Skip(
                reason: "running as root, which can read any file, and there is no user nobody to run the app as.")
        }
        let (uid, gid) = (nobody.pointee.pw_uid, nobody.pointee.pw_gid)
        // NB: the build directory may be inside a folder nobody cannot enter (such as /root), so
        // the app runs from a copy. The temporary directory gets the execute bit only (0711):
        // nobody can reach its own store inside but not list or change anything else.
        let bin = root.appendingPathComponent("bin", isDirectory: true)
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        let copy = bin.appendingPathComponent("tinystorage").path
        try FileManager.default.copyItem(atPath: executable, toPath: copy)
        try setPermissions(0o755, bin.path)
        try setPermissions(0o755, copy)
        try setPermissions(0o711, root.path)
        let files = try FileManager.default.contentsOfDirectory(atPath: storeDirectory.path)
        for path in [storeDirectory.path] + files.map({ storeDirectory.appendingPathComponent($0).path }) {
            guard chown(path, uid, gid) == 0 else {
                throw Failure("could not hand \(path) over to the user nobody (errno \(errno))")
            }
        }
        return [setpriv, "--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", copy]
    }

    // MARK: Helpers

    private func open(_ name: String) -> TinyStorage {
        TinyStorage(insideDirectory: root, name: name, durability: .immediate, logger: CollectingLogger())
    }

    private func setPermissions(_ mode: Int, _ path: String) throws {
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
    }

    /// A `name=value` line a child printed, or a failure showing what went wrong in it.
    private func field(_ name: String, of result: ChildProcess.Result, from who: String) throws -> String {
        guard result.status == 0, let value = result.field(name) else {
            let detail = result.stderr.trimmingCharacters(in: .whitespacesAndNewlines)
            throw Failure("\(who) exited with \(result.status)\(detail.isEmpty ? "" : ": \(detail)")")
        }
        return value
    }
}

#endif
