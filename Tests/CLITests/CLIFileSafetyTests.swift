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
/// folder is created or changed. (Only the safety is checked here: the exit code and wording for
/// `unsafeFile` are the tool's own to decide.)
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
        #expect(result.status != 0, "stderr: \(result.stderr)")
        let problem = mode == 0o777 ? "'\(store)' can be written by other users" : "'\(store)/store."
        #expect(result.stderr.contains(problem), "stderr: \(result.stderr)")
        #expect(sandbox.snapshot(outside) == before)
        #expect(!sandbox.exists(outside + "/not-yet"))
        #expect(FileManager.default.contents(atPath: outside + "/empty") == Data())
    }
}
