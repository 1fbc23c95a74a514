import Foundation
import Testing

/// export, import and info.
@Suite struct CLIExchangeTests {
    let sandbox: CLISandbox
    let store: String

    init() throws {
        sandbox = try CLISandbox()
        store = sandbox.path("settings")
        try sandbox.run("write", store, "profile", #"{"name": "Ada",  "age": 36.0}"#).expectSuccess()
        try sandbox.run("write", store, "streak", "365").expectSuccess()
        try sandbox.run("write", store, "title", "--string", "line\none").expectSuccess()
    }

    @Test func exportPrintsOneObjectWithTheStoredBytes() throws {
        let export = try sandbox.run("export", store)
        export.expectSuccess()
        #expect(
            export.output == """
                {
                  "profile": {"name": "Ada",  "age": 36.0},
                  "streak": 365,
                  "title": "line\\none"
                }

                """)
        let parsed = try JSONSerialization.jsonObject(with: export.stdout) as? [String: Any]
        #expect(parsed?.keys.sorted() == ["profile", "streak", "title"])
    }

    @Test func exportThenImportRestoresTheSameBytes() throws {
        let export = try sandbox.run("export", store)
        let file = sandbox.path("backup.json")
        try export.stdout.write(to: URL(fileURLWithPath: file))
        let copy = sandbox.path("copy")
        let importResult = try sandbox.run("import", copy, file)
        importResult.expectSuccess()
        #expect(importResult.output.isEmpty)
        #expect(try sandbox.run("export", copy).output == export.output)
        #expect(try sandbox.run("read", copy, "profile", "--raw").output == #"{"name": "Ada",  "age": 36.0}"#)
    }

    @Test func importReadsStandardInputAndKeepsKeysNotInTheFile() throws {
        let json = Data(#"{"streak": 366, "new": [1, {"b": 2}]}"#.utf8)
        try sandbox.run("import", store, "-", stdin: json).expectSuccess()
        #expect(try sandbox.run("keys", store).output == "new\nprofile\nstreak\ntitle\n")
        #expect(try sandbox.run("read", store, "streak").output == "366\n")
        #expect(try sandbox.run("read", store, "new", "--raw").output == #"[1, {"b": 2}]"#)
    }

    @Test func importingAnEmptyObjectChangesNothing() throws {
        let before = sandbox.dataFile(store)
        try sandbox.run("import", store, "-", stdin: Data("{}".utf8)).expectSuccess()
        #expect(sandbox.dataFile(store) == before)
    }

    @Test func infoDescribesTheStore() throws {
        let info = try sandbox.run("info", store)
        info.expectSuccess()
        #expect(info.output.contains("store:       \(URL(fileURLWithPath: store).standardizedFileURL.path)\n"))
        #expect(info.output.contains("store.tinystorage ("))
        #expect(info.output.contains("keys:        3\n"))
        #expect(info.output.contains("available:   yes\n"))
    }
}
