import Foundation
import Testing
import TinyStorage

/// The everyday commands: write, read, keys, delete.
@Suite struct CLIReadWriteTests {
    let sandbox: CLISandbox
    let store: String

    init() throws {
        sandbox = try CLISandbox()
        store = sandbox.path("settings")
    }

    @Test func writeThenReadPrintsPrettyJSONWithSortedKeys() throws {
        let write = try sandbox.run(
            "write", store, "profile", #"{"name": "Ada", "age": 36, "tags": ["a/b", true, null]}"#)
        write.expectSuccess()
        #expect(write.output.isEmpty)

        let read = try sandbox.run("read", store, "profile")
        read.expectSuccess()
        #expect(
            read.output == """
                {
                  "age" : 36,
                  "name" : "Ada",
                  "tags" : [
                    "a/b",
                    true,
                    null
                  ]
                }

                """)
    }

    @Test func infoShowsTheLiveDataAndTheThreeLargestKeysAsTheLibrarySeesThem() throws {
        try sandbox.run("write", store, "note", "\"" + String(repeating: "n", count: 300) + "\"").expectSuccess()
        try sandbox.run("write", store, "tab\tkey", "[1, 2, 3]").expectSuccess()
        try sandbox.run("write", store, "streak", "365").expectSuccess()
        try sandbox.run("write", store, "on", "true").expectSuccess()
        let info = try sandbox.run("info", store)
        info.expectSuccess()
        let statistics = try TinyStorage(insideDirectory: sandbox.root, name: "settings").statistics
        #expect(info.output.contains("keys:        4\n"))
        #expect(
            info.output.contains(
                "live data:   \(statistics.liveBytes) bytes (what the data file would take compacted)\n"))
        #expect(info.output.contains(#"largest:     "note" 302 bytes, "tab\tkey" 9 bytes, "on" 4 bytes"# + "\n"))
    }

    @Test func readRawPrintsTheStoredBytesExactly() throws {
        try sandbox.run("write", store, "numbers", "  {\"b\": 1.0,  \"a\": [2, 3e2]}\n").expectSuccess()
        let raw = try sandbox.run("read", store, "numbers", "--raw")
        raw.expectSuccess()
        #expect(raw.output == #"{"b": 1.0,  "a": [2, 3e2]}"#)
    }

    @Test func writeStringStoresThePlainTextAsAJSONString() throws {
        try sandbox.run("write", store, "greeting", "--string", "Hello, \"world\"/\\").expectSuccess()
        let raw = try sandbox.run("read", store, "greeting", "--raw")
        #expect(raw.output == #""Hello, \"world\"/\\""#)
        let pretty = try sandbox.run("read", store, "greeting")
        #expect(pretty.output == #""Hello, \"world\"/\\""# + "\n")
    }

    @Test(arguments: ["-5", "-0.5e3"])
    func negativeNumbersAreValuesNotOptions(value: String) throws {
        try sandbox.run("write", store, "delta", value).expectSuccess()
        #expect(try sandbox.run("read", store, "delta", "--raw").output == value)
        try sandbox.run("write", store, "delta", "--", "7").expectSuccess()
        #expect(try sandbox.run("read", store, "delta", "--raw").output == "7")
    }

    @Test func keysAreSortedOnePerLine() throws {
        for key in ["zeta", "alpha", "Beta", "mid dle"] {
            try sandbox.run("write", store, key, "1").expectSuccess()
        }
        let keys = try sandbox.run("keys", store)
        keys.expectSuccess()
        #expect(keys.output == "Beta\nalpha\nmid dle\nzeta\n")
    }

    @Test func readWithoutAKeyPrintsTheWholeStore() throws {
        try sandbox.run("write", store, "b", "[1]").expectSuccess()
        try sandbox.run("write", store, "a", "true").expectSuccess()
        let read = try sandbox.run("read", store)
        read.expectSuccess()
        #expect(read.output == "{\n  \"a\" : true,\n  \"b\" : [\n    1\n  ]\n}\n")
    }

    @Test func anEmptyStoreReadsAsAnEmptyObjectAndNoKeys() throws {
        try sandbox.run("write", store, "k", "1").expectSuccess()
        try sandbox.run("delete", store, "k").expectSuccess()
        #expect(try sandbox.run("read", store).output == "{}\n")
        let keys = try sandbox.run("keys", store)
        keys.expectSuccess()
        #expect(keys.output.isEmpty)
    }

    @Test func deleteRemovesTheKey() throws {
        try sandbox.run("write", store, "keep", "1").expectSuccess()
        try sandbox.run("write", store, "drop", "2").expectSuccess()
        let delete = try sandbox.run("delete", store, "drop")
        delete.expectSuccess()
        #expect(delete.output.isEmpty)
        #expect(try sandbox.run("keys", store).output == "keep\n")
        try sandbox.run("read", store, "drop").expectFailure(1, "no key \"drop\"")
    }

    @Test func overwritingAKeyReplacesItsValue() throws {
        try sandbox.run("write", store, "streak", "364").expectSuccess()
        try sandbox.run("write", store, "streak", "365").expectSuccess()
        #expect(try sandbox.run("read", store, "streak").output == "365\n")
    }

    @Test func writeCreatesAStoreInANewDirectory() throws {
        #expect(!sandbox.exists(store))
        try sandbox.run("write", store, "k", "1").expectSuccess()
        #expect(sandbox.exists(store + "/store.tinystorage"))
    }

    @Test func writeCreatesAStoreInAnEmptyDirectory() throws {
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: false)
        try sandbox.run("write", store, "k", "1").expectSuccess()
        #expect(try sandbox.run("read", store, "k").output == "1\n")
    }

    @Test func relativeStorePathsAreResolvedAgainstTheWorkingDirectory() throws {
        try sandbox.run("write", "settings", "k", "\"v\"").expectSuccess()
        #expect(try sandbox.run("read", "./settings/", "k", "--raw").output == "\"v\"")
        #expect(try sandbox.run("keys", store).output == "k\n")
    }
}
