import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue 14 with the tool's writing commands: links planted in a store folder others may write
/// to are never followed. The command fails and names the path, and nothing outside the store
/// folder is created or changed; the tool exits with 9 (not safe to use) and says what is where.
@Suite struct CLIFileSafetyTests {
    let sandbox: CLISandbox
    let store: String
    let outside: String

    /// A store holding `streak`, then the issue's links: `store.lock` to a name that does not
    /// exist outside, `store.tinystorage` to an existing empty file outside.
    init() throws {
        sandbox = try CLISandbox()
        store = sandbox.path("settings")
        outside = sandbox.path("outside")
        try sandbox.run("write", store, "streak", "364").expectSuccess()
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: false)
        try Data().write(to: URL(fileURLWithPath: outside + "/empty"))
        try Data(#"{"streak": 1}"#.utf8).write(to: URL(fileURLWithPath: sandbox.path("import.json")))
        for (name, target) in [("store.lock", "not-yet"), ("store.tinystorage", "empty")] {
            try FileManager.default.removeItem(atPath: store + "/" + name)
            try FileManager.default.createSymbolicLink(
                atPath: store + "/" + name, withDestinationPath: outside + "/" + target)
        }
    }

    static let writingCommands: [[String]] = [
        ["write", "streak", "1"], ["delete", "streak"], ["import", "import.json"], ["compact"],
    ]

    @Test(arguments: [0o777, 0o1777] as [mode_t], writingCommands)
    func aWritingCommandNeverFollowsAPlantedLink(mode: mode_t, command: [String]) throws {
        #expect(chmod(store, mode) == 0)
        let before = sandbox.snapshot(outside)

        let result = try sandbox.run([command[0], store] + command.dropFirst())
        #expect(result.status == 9, "stderr: \(result.stderr)")
        #expect(result.stderr.hasPrefix("error: the store '\(store)' is not safe to use: "), "stderr: \(result.stderr)")
        let problem = mode == 0o777 ? "'\(store)' can be written by other users" : "'\(store)/store."
        #expect(result.stderr.contains(problem), "stderr: \(result.stderr)")
        #expect(sandbox.snapshot(outside) == before)
        #expect(!sandbox.exists(outside + "/not-yet"))
        #expect(FileManager.default.contents(atPath: outside + "/empty") == Data())
    }

    static let readingCommands: [[String]] = [
        ["read", "streak"], ["read"], ["keys"], ["export"], ["info"], ["verify"],
    ]

    /// What is planted where the data file should be is never taken for an empty or missing
    /// store: an empty FIFO has no bytes, a dangling link looks like nothing at all.
    @Test(arguments: ["fifo", "dangling link", "link to the empty file"], readingCommands)
    func aReadingCommandSaysThePlantedThingIsNotSafe(planted: String, command: [String]) throws {
        let dataFile = store + "/store.tinystorage"
        try FileManager.default.removeItem(atPath: dataFile)
        switch planted {
        case "fifo": #expect(mkfifo(dataFile, 0o600) == 0)
        case "dangling link":
            try FileManager.default.createSymbolicLink(atPath: dataFile, withDestinationPath: outside + "/not-yet")
        default: try FileManager.default.createSymbolicLink(atPath: dataFile, withDestinationPath: outside + "/empty")
        }
        let before = sandbox.snapshot(outside)

        let result = try sandbox.run([command[0], store] + command.dropFirst())
        #expect(result.status == 9, "stderr: \(result.stderr)")
        let what = planted == "fifo" ? "is a FIFO" : "is a symbolic link"
        #expect(result.stderr.contains("'\(dataFile)' \(what)"), "stderr: \(result.stderr)")
        #expect(sandbox.snapshot(outside) == before)
        #expect(!sandbox.exists(outside + "/not-yet"))
    }
}
