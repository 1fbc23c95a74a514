import Foundation
import Testing
import TinyStorage

/// Issue 9, item 4, in the tool: `Data` values — stored by an app as raw bytes, or adopted from the
/// original TinyStorage — are shown as base64 with a note, printed as bytes with `--raw`, written
/// with `write --data`, and kept with their kind through `export` and `import`.
@Suite struct CLIDataValueTests {
    let sandbox: CLISandbox
    let store: String
    static let bytes = Data([0, 1, 2, 0xFF])

    init() throws {
        sandbox = try CLISandbox()
        store = sandbox.path("settings")
    }

    /// The store through the library, as an app in another process sees it.
    func library() -> TinyStorage {
        TinyStorage(insideDirectory: sandbox.root, name: "settings")
    }

    @Test func writeDataStoresTheBytesAnAppReadsAsData() throws {
        try sandbox.run("write", store, "avatar", "--data", "AAEC/w==").expectSuccess()
        #expect(try library().retrieveOrThrow(type: Data.self, forKey: "avatar") == Self.bytes)
        let raw = try sandbox.run("read", store, "avatar", "--raw")
        raw.expectSuccess()
        #expect(raw.stdout == Self.bytes)
    }

    @Test func readShowsADataValueAsBase64AndSaysSo() throws {
        try library().storeOrThrow(Self.bytes, forKey: "avatar")
        try library().storeOrThrow(7, forKey: "streak")
        let one = try sandbox.run("read", store, "avatar")
        #expect(one.status == 0)
        #expect(one.output == "\"AAEC/w==\"\n")
        #expect(one.stderr.hasPrefix("note: \"avatar\" holds raw bytes (a Data value), shown as a base64 string"))
        let all = try sandbox.run("read", store)
        #expect(all.output == "{\n  \"avatar\" : \"AAEC/w==\",\n  \"streak\" : 7\n}\n")
        #expect(all.stderr.contains("`read <key> --raw` prints the bytes"))
        // A JSON value gets no note.
        try sandbox.run("read", store, "streak").expectSuccess()
    }

    @Test func exportAndImportKeepEveryValueWithItsBytesAndKind() throws {
        // An original TinyStorage store: a raw Data value and JSON values, adopted as they are.
        let original: [String: Data] = [
            "icon": Data([0xFF, 0xFE]), "name": Data(#""Ada""#.utf8), "blob": Data("[1]".utf8),
        ]
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: false)
        try PropertyListSerialization.data(fromPropertyList: original, format: .binary, options: 0)
            .write(to: URL(fileURLWithPath: store + "/tiny-storage.plist"))
        let storage = library()
        try storage.storeOrThrow(Self.bytes, forKey: "avatar")
        try storage.storeOrThrow(365, forKey: "streak")

        let export = try sandbox.run("export", store)
        export.expectSuccess()
        #expect(
            export.output == """
                {
                  "avatar": "AAEC/w==",
                  "blob": [1],
                  "icon": "//4=",
                  "name": "Ada",
                  "streak": 365,
                  "$tinystorage.kinds": {"avatar": "data", "blob": "original", "icon": "original-base64", "name": "original"}
                }

                """)
        let copy = sandbox.path("copy")
        try sandbox.run("import", copy, "-", stdin: export.stdout).expectSuccess()
        let restored = TinyStorage(insideDirectory: sandbox.root, name: "copy")
        #expect(try restored.retrieveOrThrow(type: Data.self, forKey: "avatar") == Self.bytes)
        #expect(try restored.retrieveOrThrow(type: Data.self, forKey: "icon") == Data([0xFF, 0xFE]))
        // An original value that is JSON keeps reading as its raw bytes when asked for Data.
        #expect(try restored.retrieveOrThrow(type: Data.self, forKey: "blob") == Data("[1]".utf8))
        #expect(try restored.retrieveOrThrow(type: [Int].self, forKey: "blob") == [1])
        #expect(try sandbox.run("export", copy).output == export.output)
    }

    @Test(arguments: [
        #"{"a": "AAEC", "$tinystorage.kinds": {"a": "picture"}}"#,
        #"{"a": 1, "$tinystorage.kinds": {"a": "data"}}"#,
        #"{"a": "not base64!", "$tinystorage.kinds": {"a": "data"}}"#,
        #"{"a": 1, "$tinystorage.kinds": {"b": "data"}}"#,
        #"{"a": 1, "$tinystorage.kinds": ["a"]}"#,
    ])
    func importRefusesKindsItCannotApplyAndWritesNothing(file: String) throws {
        try sandbox.run("write", store, "a", "0").expectSuccess()
        let before = sandbox.dataFile(store)
        let result = try sandbox.run("import", store, "-", stdin: Data(file.utf8))
        result.expectFailure(5, "error: in standard input")
        #expect(sandbox.dataFile(store) == before)
    }

    @Test func exportRefusesAStoreHoldingTheReservedKindsKey() throws {
        try library().storeOrThrow(1, forKey: "$tinystorage.kinds")
        try sandbox.run("export", store).expectFailure(5, "error: the store holds a key named \"$tinystorage.kinds\"")
    }

    @Test(arguments: [["--data", "not base64!"], ["--data", "--string", "AAEC"]])
    func writeDataRefusesBadInputAndCreatesNothing(arguments: [String]) throws {
        let result = try sandbox.run(["write", store, "avatar"] + arguments)
        #expect(result.status != 0)
        #expect(!sandbox.exists(store))
    }
}
