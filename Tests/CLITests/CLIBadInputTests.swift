import Foundation
import Testing

/// Bad input gets one clear line on stderr, a documented exit code, and changes nothing.
@Suite struct CLIBadInputTests {
    let sandbox: CLISandbox
    /// A real store holding `streak = 365`.
    let store: String

    init() throws {
        sandbox = try CLISandbox()
        store = sandbox.path("settings")
        try sandbox.run("write", store, "streak", "365").expectSuccess()
    }

    static let readOnlyCommands: [[String]] = [["keys"], ["read"], ["read", "streak"], ["export"], ["info"]]

    // MARK: Not a store (exit 3)

    @Test(arguments: readOnlyCommands + [["delete", "streak"]])
    func aMissingPathIsNotAStoreAndIsNotCreated(command: [String]) throws {
        let missing = sandbox.path("missing")
        let result = try sandbox.run([command[0], missing] + command.dropFirst())
        result.expectFailure(3, "'\(missing)' is not a TinyStorage store (it does not exist)")
        #expect(!sandbox.exists(missing))
    }

    @Test(arguments: readOnlyCommands + [["delete", "streak"], ["write", "k", "1"], ["import", "-"]])
    func aNonEmptyDirectoryWithoutADataFileIsNotAStore(command: [String]) throws {
        let folder = sandbox.path("folder")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        try Data("notes".utf8).write(to: URL(fileURLWithPath: folder + "/notes.txt"))
        let before = sandbox.snapshot(folder)
        let result = try sandbox.run([command[0], folder] + command.dropFirst(), stdin: Data(#"{"k": 1}"#.utf8))
        result.expectFailure(3, "'\(folder)' is not a TinyStorage store (no store.tinystorage inside)")
        #expect(sandbox.snapshot(folder) == before)
    }

    @Test(arguments: readOnlyCommands)
    func anEmptyDirectoryIsNotAStoreForReading(command: [String]) throws {
        let folder = sandbox.path("empty")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        try sandbox.run([command[0], folder] + command.dropFirst()).expectFailure(3, "no store.tinystorage inside")
        #expect(sandbox.snapshot(folder).isEmpty)
    }

    @Test func aFileIsNotAStore() throws {
        let file = sandbox.path("file.txt")
        try Data("text".utf8).write(to: URL(fileURLWithPath: file))
        try sandbox.run("keys", file).expectFailure(3, "is not a TinyStorage store (it is a file, not a directory)")
        try sandbox.run("write", file, "k", "1").expectFailure(3, "it is a file, not a directory")
        #expect(FileManager.default.contents(atPath: file) == Data("text".utf8))
    }

    @Test func theDataFileItselfPointsAtItsDirectory() throws {
        try sandbox.run("keys", store + "/store.tinystorage")
            .expectFailure(3, "it is the data file, not the store directory). Pass its directory: '\(store)'")
    }

    @Test func writeNeedsAnExistingParentDirectory() throws {
        let deep = sandbox.path("no/such/parent")
        try sandbox.run("write", deep, "k", "1").expectFailure(3, "its parent directory")
        #expect(!sandbox.exists(sandbox.path("no")))
        try sandbox.run("import", deep, "-", stdin: Data("{}".utf8)).expectFailure(3, "does not exist")
        #expect(!sandbox.exists(sandbox.path("no")))
    }

    // MARK: Unknown key (exit 1)

    @Test func readingAnUnknownKeyFails() throws {
        let before = sandbox.snapshot(store)
        try sandbox.run("read", store, "nope").expectFailure(1, "no key \"nope\" in the store")
        try sandbox.run("read", store, "nope", "--raw").expectFailure(1, "no key \"nope\"")
        #expect(sandbox.dataFile(store) == before["store.tinystorage"])
    }

    @Test func deletingAnUnknownKeyFailsAndWritesNothing() throws {
        let before = sandbox.dataFile(store)
        try sandbox.run("delete", store, "nope").expectFailure(1, "no key \"nope\" in the store")
        #expect(sandbox.dataFile(store) == before)
        try sandbox.run("delete", store, "nope", "--ignore-missing").expectSuccess()
        #expect(sandbox.dataFile(store) == before)
    }

    // MARK: Invalid input (exit 5)

    @Test(arguments: [
        ("hello", "not valid JSON: expected a JSON value at line 1, column 1, found 'h'"),
        (#"{"a": 1,}"#, "expected a key in double quotes at line 1, column 9, found '}'"),
        ("[1, 2", "expected ',' or ']' at line 1, column 6, found the end of the input"),
        ("", "expected a JSON value at line 1, column 1, found the end of the input"),
        ("1 2", "expected the end of the input after the value"),
        ("1e400", "not JSON TinyStorage can store"),
        ("{\"a\":\n  [1,\n   02]}", "expected ',' or ']' at line 3, column 5, found '2'"),
        (String(repeating: "[", count: 600) + String(repeating: "]", count: 600), "at most 512 levels of nesting"),
    ])
    func invalidJSONIsRefusedAndNothingIsWritten(value: String, message: String) throws {
        let before = sandbox.dataFile(store)
        try sandbox.run("write", store, "streak", value).expectFailure(5, message)
        try sandbox.run("write", store, "other", value).expectFailure(5, "Nothing was written")
        #expect(sandbox.dataFile(store) == before)
        #expect(try sandbox.run("keys", store).output == "streak\n")

        let fresh = sandbox.path("fresh")
        try sandbox.run("write", fresh, "k", value).expectFailure(5, message)
        #expect(!sandbox.exists(fresh))
    }

    @Test(arguments: [("", "a key must not be empty"), (String(repeating: "k", count: 1025), "the limit is 1024")])
    func invalidKeysAreRefusedAndNothingIsWritten(key: String, message: String) throws {
        let before = sandbox.dataFile(store)
        try sandbox.run("write", store, key, "1").expectFailure(5, message)
        try sandbox.run("read", store, key).expectFailure(5, message)
        try sandbox.run("delete", store, key).expectFailure(5, message)
        #expect(sandbox.dataFile(store) == before)
        let fresh = sandbox.path("fresh")
        try sandbox.run("write", fresh, key, "1").expectFailure(5, message)
        #expect(!sandbox.exists(fresh))
    }

    @Test(arguments: [
        ("[1]", "is not a JSON object of key to value: expected a JSON object '{'"),
        (#"{"a": 1, "a": 2}"#, "the key \"a\" appears twice"),
        (#"{"a": 1, "b": tru}"#, "expected 'true' at line 1, column 18"),
        (#"{"a": 1, "": 2}"#, "a key must not be empty"),
        (#"{"a": 1e999}"#, "the value of \"a\""),
    ])
    func invalidImportsWriteNothing(json: String, message: String) throws {
        let before = sandbox.dataFile(store)
        try sandbox.run("import", store, "-", stdin: Data(json.utf8)).expectFailure(5, message)
        #expect(sandbox.dataFile(store) == before)
        let fresh = sandbox.path("fresh")
        try sandbox.run("import", fresh, "-", stdin: Data(json.utf8)).expectFailure(5, message)
        #expect(!sandbox.exists(fresh))
    }

    @Test func importingAMissingFileFails() throws {
        let before = sandbox.dataFile(store)
        try sandbox.run("import", store, sandbox.path("nothing.json")).expectFailure(5, "no such file")
        #expect(sandbox.dataFile(store) == before)
    }

    // MARK: Unavailable (exit 4)

    static let writingCommands: [[String]] = [["write", "k", "1"], ["delete", "streak"], ["import", "-"]]

    @Test(arguments: readOnlyCommands)
    func readingADamagedStoreReportsItAndLeavesItUntouched(command: [String]) throws {
        let garbage = Data("this is not a TinyStorage file, but it must survive".utf8)
        try garbage.write(to: URL(fileURLWithPath: store + "/store.tinystorage"))
        let result = try sandbox.run([command[0], store] + command.dropFirst())
        #expect(result.status == 4)
        #expect(
            result.stderr
                == "error: the store '\(store)' cannot be read (corrupted): the data file does not start with "
                + "TinyStorage's header, so it is not a store file. Nothing was changed; `tinystorage verify "
                + "'\(store)'` shows the details.\n")
        #expect(sandbox.dataFile(store) == garbage)
        #expect(!sandbox.exists(store + "/quarantine"))
        if command[0] == "info" {
            #expect(result.output.contains("available:   no\n"))
        } else {
            #expect(result.output.isEmpty)
        }
    }

    @Test(arguments: writingCommands + [["compact"]])
    func writingToAFileThatIsNotAStoreIsRefusedAndLeavesItUntouched(command: [String]) throws {
        let garbage = Data("this is not a TinyStorage file, but it must survive".utf8)
        try garbage.write(to: URL(fileURLWithPath: store + "/store.tinystorage"))
        let result = try sandbox.run([command[0], store] + command.dropFirst(), stdin: Data(#"{"k": 1}"#.utf8))
        result.expectFailure(4, "error: the store '\(store)' cannot be read (corrupted): ")
        #expect(sandbox.dataFile(store) == garbage)
        #expect(!sandbox.exists(store + "/quarantine"))
    }

    @Test(arguments: writingCommands + [["compact"]])
    func writingToADamagedStoreSetsTheDamageAsideAndSaysSo(command: [String]) throws {
        try sandbox.run("write", store, "k", "0").expectSuccess()
        try sandbox.run("write", store, "other", "2").expectSuccess()
        // A flipped byte inside the first record (`streak`), after the header.
        var damaged = try #require(sandbox.dataFile(store))
        damaged[DataFileBytes.headerSize + 8] ^= 0xFF
        try damaged.write(to: URL(fileURLWithPath: store + "/store.tinystorage"))

        let result = try sandbox.run([command[0], store] + command.dropFirst(), stdin: Data(#"{"k": 1}"#.utf8))
        // NB: the CLI writes durably, so the damaged record was on stable storage: data loss.
        let warning = "warning: the store '\(store)': Data known to be durable was damaged or is missing: "
        #expect(result.stderr.hasPrefix(warning), "stderr: \(result.stderr)")
        #expect(result.stderr.contains("The damaged bytes were copied to \(store)/quarantine/"))
        // The damaged file is kept, byte for byte, in quarantine/; what verified is still there.
        let quarantined = try FileManager.default.contentsOfDirectory(atPath: store + "/quarantine")
        #expect(quarantined.map { FileManager.default.contents(atPath: store + "/quarantine/" + $0) } == [damaged])
        #expect(try sandbox.run("read", store, "other").output == "2\n")
        switch command[0] {
        case "delete":
            #expect(result.status == 1, "streak was in the damaged record: \(result.stderr)")
        case "compact":
            #expect(result.status == 0)
        default:
            #expect(result.status == 0)
            #expect(try sandbox.run("read", store, "k").output == "1\n")
        }
        try sandbox.run("verify", store).expectSuccess()
    }

    @Test(arguments: readOnlyCommands + writingCommands + [["verify"], ["compact"]])
    func aStoreFromANewerTinyStorageIsRefusedAndLeftUntouched(command: [String]) throws {
        let file = URL(fileURLWithPath: store + "/store.tinystorage")
        try DataFileBytes.header(try Data(contentsOf: file), withVersion: 99).write(to: file)
        let before = sandbox.snapshot(store)
        let result = try sandbox.run([command[0], store] + command.dropFirst(), stdin: Data(#"{"k": 1}"#.utf8))
        #expect(result.status == 4)
        #expect(result.stderr.hasPrefix("error: the store '\(store)' cannot be read (unsupportedFormat): "))
        #expect(result.stderr.split(separator: "\n").count == 1, "one line: \(result.stderr)")
        #expect(sandbox.snapshot(store) == before)
    }

    @Test func aDataFileThatIsADirectoryIsNotSafeToUse() throws {
        let odd = sandbox.path("odd")
        try FileManager.default.createDirectory(atPath: odd + "/store.tinystorage", withIntermediateDirectories: true)
        try sandbox.run("keys", odd).expectFailure(9, "is not safe to use: '\(odd)/store.tinystorage' is a directory")
    }

    @Test func anInterruptedWriteAtTheEndIsIgnoredByReadingWithoutRepairingIt() throws {
        // The start of a record that promises 64 bytes, cut short, where a write stopped by a
        // power loss leaves it: after the records, in the zeros allocated ahead on Linux. The
        // lock file goes too, as a restart leaves it: its page no longer says where the log ends,
        // so the next writer checks the whole file. (Without a restart, only a writer that died
        // holding the lock leaves such remains, and the lock tells the next holder.)
        let bytes = try #require(sandbox.dataFile(store))
        let end = DataFileBytes.logicalEnd(bytes)
        let torn = bytes.prefix(end) + [64, 0, 0, 0] + Array("torn!!".utf8) + bytes.dropFirst(end + 10)
        try torn.write(to: URL(fileURLWithPath: store + "/store.tinystorage"))
        try? FileManager.default.removeItem(atPath: store + "/store.lock")
        let before = sandbox.snapshot(store)

        let keys = try sandbox.run("keys", store)
        keys.expectSuccess()
        #expect(keys.output == "streak\n")
        let info = try sandbox.run("info", store)
        info.expectSuccess()
        #expect(info.output.contains("damage:      an interrupted last write (10 bytes), ignored"))
        #expect(try sandbox.run("read", store, "streak").output == "365\n")
        #expect(sandbox.snapshot(store) == before, "reading repaired or changed the store")

        // The next writer sets the torn bytes aside, says so, and carries on.
        let write = try sandbox.run("write", store, "streak", "366")
        #expect(write.status == 0)
        #expect(
            write.stderr.hasPrefix("warning: the store '\(store)': Recovered from an interrupted write: 10 bytes"),
            "stderr: \(write.stderr)")
        #expect(write.stderr.split(separator: "\n").count == 1)
        #expect(try sandbox.run("info", store).output.contains("quarantine:  1 file(s) in "))
        try sandbox.run("verify", store).expectSuccess()
    }

    @Test(arguments: readOnlyCommands + [["verify"]])
    func readingCommandsCreateNoLockFile(command: [String]) throws {
        try FileManager.default.removeItem(atPath: store + "/store.lock")
        let before = sandbox.snapshot(store)
        try sandbox.run([command[0], store] + command.dropFirst()).expectSuccess()
        #expect(sandbox.snapshot(store) == before)
    }

    @Test func anEmptyDataFileReadsAsAnEmptyStoreWithoutBeingWritten() throws {
        let blank = sandbox.path("blank")
        try FileManager.default.createDirectory(atPath: blank, withIntermediateDirectories: false)
        try #require(FileManager.default.createFile(atPath: blank + "/store.tinystorage", contents: Data()))
        for command in Self.readOnlyCommands where command != ["read", "streak"] {
            try sandbox.run([command[0], blank]).expectSuccess()
        }
        #expect(try sandbox.run("read", blank).output == "{}\n")
        #expect(sandbox.snapshot(blank) == ["store.tinystorage": Data()])
    }

    // MARK: Usage (exit 64)

    @Test(arguments: [
        ["read"], ["write", "s", "k"], ["write", "s", "k", "1", "2"], ["write", "s", "k", "--strnig"],
        ["read", "s", "--raw"], ["delete", "s"], ["import", "s"], ["frobnicate"],
    ])
    func usageErrorsExitWith64(arguments: [String]) throws {
        let result = try sandbox.run(arguments)
        result.expectFailure(64, arguments == ["frobnicate"] ? "See 'tinystorage --help'." : "Usage: tinystorage")
        #expect(!sandbox.exists(sandbox.path("s")))
    }
}
