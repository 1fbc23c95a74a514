import Foundation
import Testing

/// Issue 34, item 6: a permission problem is reported as one, with the exit code the help gives
/// it: 4 when this user may not read the store (or reach its folder), 6 when it may read the
/// store but not change it, or may not create it there. Never "it does not exist", never
/// "cannot be read" for a store that was read. `tinystorage` runs as `nobody` here.
@Suite(.disabled(if: CLISandbox.nobodyUnavailable != nil, "\(CLISandbox.nobodyUnavailable ?? "")"))
struct CLIPermissionTests {
    let sandbox: CLISandbox

    init() throws {
        sandbox = try CLISandbox()
    }

    /// A store holding `streak = 365`, made by `nobody` in `folder`, which `nobody` owns.
    func makeStore(in folder: String) throws -> String {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        try sandbox.handToNobody(folder)
        let store = folder + "/settings"
        try sandbox.runAsNobody("write", store, "streak", "365").expectSuccess()
        return store
    }

    static let everyCommand: [[String]] = [
        ["keys"], ["read"], ["read", "streak"], ["export"], ["info"], ["verify"], ["write", "streak", "366"],
        ["delete", "streak"], ["compact"],
    ]

    @Test(arguments: everyCommand)
    func aStoreInAFolderThisUserMayNotSearchCannotBeReadNotMissing(command: [String]) throws {
        let folder = sandbox.path("locked")
        let store = try makeStore(in: folder)
        try #require(chmod(folder, 0o000) == 0)
        defer { chmod(folder, 0o700) }
        let before = sandbox.snapshot(folder)

        let run = try runAsNobody(command, store)
        run.expectFailure(
            4, "the store '\(store)' cannot be read (permissionDenied): this user may not look inside '\(folder)'")
        #expect(!run.stderr.contains("does not exist"))
        chmod(folder, 0o700)
        #expect(sandbox.snapshot(folder) == before)
    }

    @Test(arguments: [["write", "streak", "366"], ["delete", "streak"], ["compact"], ["import", "-"]])
    func aStoreThisUserMayReadButNotWriteIsAFailedWrite(command: [String]) throws {
        let store = try makeStore(in: sandbox.path("shared"))
        for file in ["store.tinystorage", "store.lock"] { try #require(chmod(store + "/" + file, 0o400) == 0) }
        try #require(chmod(store, 0o500) == 0)
        defer { chmod(store, 0o700) }
        let before = sandbox.snapshot(store)

        let read = try runAsNobody(["read", "streak"], store)
        #expect(read.status == 0 && read.output == "365\n", "stderr: \(read.stderr)")
        let run = try runAsNobody(command, store)
        run.expectFailure(6, "this user may read the store '\(store)' but not change it (permissionDenied)")
        #expect(!run.stderr.contains("cannot be read"))
        #expect(sandbox.snapshot(store) == before)
    }

    @Test func aStoreThisUserMayNotCreateIsAFailedWrite() throws {
        let folder = sandbox.path("readonly")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        try sandbox.handToNobody(folder)
        try #require(chmod(folder, 0o555) == 0)
        let result = try sandbox.runAsNobody("write", folder + "/settings", "streak", "1")
        result.expectFailure(6, "cannot create a store at '\(folder)/settings' (permissionDenied)")
        #expect(!sandbox.exists(folder + "/settings"))
    }

    private func runAsNobody(_ command: [String], _ store: String) throws -> CLIResult {
        try sandbox.runAsNobody(arguments: [command[0], store] + command.dropFirst(), stdin: Data(#"{"k": 1}"#.utf8))
    }
}
