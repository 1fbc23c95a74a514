import Foundation
import Testing
import TinyStorage

/// Issue 34, item 8: the conventions of `git`, `sqlite3` and `defaults`: a version, a short
/// answer to no arguments, usage errors in one line, and an output error instead of a crash.
@Suite struct CLIConventionsTests {
    let sandbox: CLISandbox

    init() throws {
        sandbox = try CLISandbox()
    }

    @Test func versionPrintsTheLibrarysVersion() throws {
        let result = try sandbox.run("--version")
        result.expectSuccess()
        #expect(result.output == TinyStorage.version + "\n")
    }

    @Test func noArgumentsIsAUsageErrorOfOneLineThatNamesEveryCommand() throws {
        let result = try sandbox.run([])
        result.expectFailure(64, "error: no command given. Usage: tinystorage <command> <store-dir>")
        for command in [
            "keys", "read", "write", "delete", "export", "import", "info", "watch", "verify", "compact",
            "import-userdefaults", "demo",
        ] {
            #expect(result.stderr.contains(" \(command),") || result.stderr.contains(" \(command);"), "\(command)")
        }
        #expect(!result.stderr.contains("demo-child"))
    }

    @Test(arguments: [
        (["read"], "Missing expected argument '<store-dir>'. Usage: tinystorage read <store-dir> [<key>] [--raw]"),
        (["write", "s", "k", "--strnig"], "Unknown option '--strnig'. Usage: tinystorage write <store-dir> <key>"),
        (["keys", "s", "extra"], "Unexpected argument 'extra'. Usage: tinystorage keys <store-dir> [--expiring]; see"),
        (["frobnicate"], "Unexpected argument 'frobnicate'. See 'tinystorage --help'."),
    ])
    func aUsageErrorIsOneLineWithTheCommandsUsage(arguments: [String], message: String) throws {
        try sandbox.run(arguments).expectFailure(64, message)
    }

    /// `read … > /dev/full` crashed with a Swift fatal error (exit 132); it fails like `cat`.
    @Test(.enabled(if: FileManager.default.isWritableFile(atPath: "/dev/full"), "needs /dev/full"))
    func anOutputThatCannotBeWrittenIsAnErrorNotACrash() throws {
        let store = sandbox.path("settings")
        try sandbox.run("write", store, "streak", "365").expectSuccess()
        for command in [["read", store, "streak"], ["export", store], ["keys", store], ["verify", store]] {
            let result = try sandbox.run(after: "exec >/dev/full", arguments: command)
            #expect(result.status == 74, "\(command): \(result.stderr)")
            #expect(
                result.stderr
                    == "error: cannot write to standard output: No space left on device. What was printed is incomplete.\n"
            )
        }
    }
}
