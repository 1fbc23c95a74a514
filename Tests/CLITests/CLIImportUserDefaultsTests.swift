import Foundation
import Testing
import TinyStorage

/// `import-userdefaults` from a plist file or a suite: every supported key in one commit, a
/// sentinel that refuses an empty-looking source, and a summary of what happened to each key.
@Suite struct CLIImportUserDefaultsTests {
    let sandbox: CLISandbox
    let store: String

    init() throws {
        sandbox = try CLISandbox()
        store = sandbox.path("settings")
    }

    // NB: whole seconds, because an XML plist keeps dates to the second.
    static let opened = Date(timeIntervalSinceReferenceDate: 700_000_000)

    /// What an app's preferences file typically holds, one of each kind.
    static var preferences: [String: Any] {
        [
            "onboarded": true, "muted": false, "streak": 364, "one": 1, "ratio": 2.5, "name": "Ada/Lovelace",
            "opened": opened, "avatar": Data([0xFF, 0xFE, 0xFD]), "tags": ["a", "b"], "scores": ["x": 1, "y": 2],
            "hasLaunchedBefore": true,
        ]
    }

    /// Writes `values` as a property list file and returns its path.
    func plist(_ values: [String: Any], format: PropertyListSerialization.PropertyListFormat = .binary) throws -> String
    {
        let path = sandbox.path("preferences-\(UUID().uuidString).plist")
        let data = try PropertyListSerialization.data(fromPropertyList: values, format: format, options: 0)
        try data.write(to: URL(fileURLWithPath: path))
        return path
    }

    func openStore() -> TinyStorage { TinyStorage(insideDirectory: sandbox.root, name: "settings") }

    @Test(arguments: [PropertyListSerialization.PropertyListFormat.binary, .xml])
    func everyKeyOfAPlistIsImportedAsTheValueTheAppStored(format: PropertyListSerialization.PropertyListFormat) throws {
        let file = try plist(Self.preferences, format: format)
        let result = try sandbox.run("import-userdefaults", store, "--plist", file, "--require", "hasLaunchedBefore")
        result.expectSuccess()
        #expect(result.output.contains("migrated  \"onboarded\" (Bool)\n"))
        #expect(result.output.contains("migrated  \"one\" (Int)\n"))
        #expect(result.output.contains("migrated  \"opened\" (Date)\n"))
        #expect(
            result.output.hasSuffix(
                "imported 11 of 11 keys from the plist '\(file)' into '\(store)' (11 written in one commit); "
                    + "0 skipped, 0 failed\n"))

        let storage = openStore()
        #expect(try storage.retrieveOrThrow(type: Bool.self, forKey: "onboarded") == true)
        #expect(try storage.retrieveOrThrow(type: Bool.self, forKey: "muted") == false)
        #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
        #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "one") == 1)
        #expect(try storage.retrieveOrThrow(type: Double.self, forKey: "ratio") == 2.5)
        #expect(try storage.retrieveOrThrow(type: String.self, forKey: "name") == "Ada/Lovelace")
        #expect(try storage.retrieveOrThrow(type: Date.self, forKey: "opened") == Self.opened)
        #expect(try storage.retrieveOrThrow(type: Data.self, forKey: "avatar") == Data([0xFF, 0xFE, 0xFD]))
        #expect(try storage.retrieveOrThrow(type: [String].self, forKey: "tags") == ["a", "b"])
        #expect(try storage.retrieveOrThrow(type: [String: Int].self, forKey: "scores") == ["x": 1, "y": 2])

        // The bytes are the ones the library writes for the same Swift values, so storing them
        // again changes nothing.
        let before = sandbox.dataFile(store)
        let items: [String: any Encodable] = [
            "onboarded": true, "one": 1, "ratio": 2.5, "name": "Ada/Lovelace", "opened": Self.opened,
            "avatar": Data([0xFF, 0xFE, 0xFD]), "tags": ["a", "b"], "scores": ["x": 1, "y": 2],
        ]
        try storage.bulkStoreOrThrow(items: items)
        #expect(sandbox.dataFile(store) == before)
    }

    @Test func nestedCollectionsAreSkippedAndUnstorableValuesFailWhileTheRestIsImported() throws {
        let file = try plist(["streak": 364, "history": [[1, 2], [3]], "groups": ["a": ["b": 1]], "nan": Double.nan])
        let result = try sandbox.run("import-userdefaults", store, "--plist", file)
        result.expectSuccess()
        #expect(
            result.output == """
                skipped   "groups": a nested collection (an array or dictionary inside another), which is not supported
                skipped   "history": a nested collection (an array or dictionary inside another), which is not supported
                failed    "nan": a number that is not finite (NaN or infinity), which JSON cannot hold
                migrated  "streak" (Int)
                imported 1 of 4 keys from the plist '\(file)' into '\(store)' (1 written in one commit); 2 skipped, 1 failed

                """)
        #expect(try sandbox.run("keys", store).output == "streak\n")
    }

    @Test func keysAlreadyInTheStoreAreKeptUnlessOverwriteIsGiven() throws {
        try sandbox.run("write", store, "streak", "400").expectSuccess()
        try sandbox.run("write", store, "name", "--string", "Ada/Lovelace").expectSuccess()
        let file = try plist(["streak": 364, "name": "Ada/Lovelace", "new": 1])

        let kept = try sandbox.run("import-userdefaults", store, "--plist", file)
        kept.expectSuccess()
        #expect(
            kept.output.contains(
                "skipped   \"streak\": the store already holds another value; --overwrite replaces it\n"))
        #expect(kept.output.contains("migrated  \"name\" (String)\n"))
        #expect(kept.output.contains("imported 2 of 3 keys"))
        #expect(try sandbox.run("read", store, "streak").output == "400\n")
        #expect(try sandbox.run("read", store, "new").output == "1\n")

        let replaced = try sandbox.run("import-userdefaults", store, "--plist", file, "--overwrite")
        replaced.expectSuccess()
        #expect(
            replaced.output.contains(
                "imported 3 of 3 keys from the plist '\(file)' into '\(store)' (1 written in one commit)"))
        #expect(try sandbox.run("read", store, "streak").output == "364\n")
    }

    @Test func aMissingSentinelRefusesAndWritesNothing() throws {
        let file = try plist(["streak": 0])
        // A new store is not created...
        try sandbox.run("import-userdefaults", store, "--plist", file, "--require", "hasLaunchedBefore")
            .expectFailure(1, "the plist '\(file)' has no \"hasLaunchedBefore\", the key --require names")
        #expect(!sandbox.exists(store))
        // ...and an existing one is not changed.
        try sandbox.run("write", store, "streak", "364").expectSuccess()
        let before = sandbox.snapshot(store)
        try sandbox.run("import-userdefaults", store, "--plist", file, "--require", "hasLaunchedBefore", "--overwrite")
            .expectFailure(1, "Nothing was imported; try again when it holds that key.")
        #expect(sandbox.snapshot(store) == before)
    }

    @Test func anEmptySourceWritesNothingAndCreatesNothing() throws {
        let file = try plist([:])
        let result = try sandbox.run("import-userdefaults", store, "--plist", file)
        result.expectSuccess()
        #expect(result.output == "the plist '\(file)' holds no keys; nothing was written.\n")
        #expect(!sandbox.exists(store))
    }

    /// Whether `UserDefaults` keeps a suite in `$XDG_CONFIG_HOME/<suite>.plist`, as corelibs
    /// Foundation does on Linux. Apple's Foundation keeps suites with the preferences daemon
    /// (`cfprefsd`), which a test cannot point at a folder of its own.
    #if os(Linux)
    static let suitesAreFilesInXDGConfigHome = true
    #else
    static let suitesAreFilesInXDGConfigHome = false
    #endif

    @Test(
        .enabled(
            if: suitesAreFilesInXDGConfigHome,
            "reads a suite from $XDG_CONFIG_HOME, where only corelibs Foundation (Linux) looks for it"))
    func aSuiteIsReadThroughUserDefaults() throws {
        let config = sandbox.path("config")
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: false)
        let data = try PropertyListSerialization.data(
            fromPropertyList: ["streak": 364, "onboarded": true, "hasLaunchedBefore": true], format: .xml,
            options: 0)
        try data.write(to: URL(fileURLWithPath: config + "/com.example.tinystorage-tests.plist"))

        let result = try sandbox.run(
            [
                "import-userdefaults", store, "--suite", "com.example.tinystorage-tests", "--require",
                "hasLaunchedBefore",
            ],
            environment: ["XDG_CONFIG_HOME": config])
        result.expectSuccess()
        #expect(result.output.contains("imported 3 of 3 keys from the suite 'com.example.tinystorage-tests'"))
        #expect(
            try sandbox.run("export", store).output
                == "{\n  \"hasLaunchedBefore\": true,\n  \"onboarded\": true,\n  \"streak\": 364\n}\n")

        let missing = try sandbox.run(
            [
                "import-userdefaults", sandbox.path("other"), "--suite", "com.example.absent", "--require",
                "hasLaunchedBefore",
            ],
            environment: ["XDG_CONFIG_HOME": config])
        missing.expectFailure(1, "the suite 'com.example.absent' has no \"hasLaunchedBefore\"")
        #expect(!sandbox.exists(sandbox.path("other")))
    }

    // MARK: Bad input

    @Test func aMissingPlistFileIsInvalidInput() throws {
        let file = sandbox.path("nothing.plist")
        try sandbox.run("import-userdefaults", store, "--plist", file)
            .expectFailure(5, "cannot read the plist '\(file)': no such file.")
        #expect(!sandbox.exists(store))
    }

    @Test func aFileThatIsNotAPlistIsInvalidInput() throws {
        let file = sandbox.path("notes.txt")
        try Data("just some notes".utf8).write(to: URL(fileURLWithPath: file))
        try sandbox.run("import-userdefaults", store, "--plist", file)
            .expectFailure(5, "the plist '\(file)' is not a property list (XML or binary plist). Nothing was written.")
        #expect(!sandbox.exists(store))
    }

    @Test func aPlistThatIsNotADictionaryIsInvalidInput() throws {
        let file = sandbox.path("list.plist")
        let data = try PropertyListSerialization.data(fromPropertyList: [1, 2], format: .xml, options: 0)
        try data.write(to: URL(fileURLWithPath: file))
        try sandbox.run("import-userdefaults", store, "--plist", file)
            .expectFailure(5, "not a dictionary of keys and values. Nothing was written.")
        #expect(!sandbox.exists(store))
    }

    @Test func aDirectoryThatIsNotAStoreIsRefused() throws {
        let folder = sandbox.path("folder")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        try Data("notes".utf8).write(to: URL(fileURLWithPath: folder + "/notes.txt"))
        let before = sandbox.snapshot(folder)
        let file = try plist(["streak": 364])
        try sandbox.run("import-userdefaults", folder, "--plist", file).expectFailure(
            3, "(no store.tinystorage inside)")
        #expect(sandbox.snapshot(folder) == before)
    }

    @Test(arguments: [
        ([String](), "Name the source: --suite <name> or --plist <path>."),
        (["--suite", "a", "--plist", "b"], "Use either --suite or --plist, not both."),
        (["--plist"], "Missing value for '--plist <path>'"),
    ])
    func sourceUsageErrorsExitWith64(options: [String], message: String) throws {
        let result = try sandbox.run(["import-userdefaults", store] + options)
        result.expectFailure(64, message)
        #expect(!sandbox.exists(store))
    }
}
