import Foundation
import Testing

/// Every Swift snippet of README.md and of the DocC articles, compiled exactly as printed.
///
/// The snippets are read from the Markdown files themselves, so a document cannot drift from the
/// API. Each one is compiled on its own, as its own module, against the TinyStorage module this
/// test run built, in the Swift 6 language mode an app would use, with warnings as errors:
///
/// - A snippet with `import` lines is a whole file, compiled with nothing added to it; one without
///   is a fragment, and gets `import Foundation` and `import TinyStorage` (and `Testing` for
///   `@Test`, `SwiftUI` for a view) in front of it, as the file a reader pastes it into has.
/// - What a fragment uses without declaring it — `storage`, the `.streak` key, the `Settings`
///   types — comes from ``context``, in a second file of the same module, only when the snippet
///   uses it and does not declare it itself.
/// - A manifest (`// swift-tools-version:`) is loaded by `swift package dump-package`.
/// - Snippets that need an Apple framework (``appleOnly``) are compiled where it exists.
///
/// NB: compiled with `-emit-sil`, not only type-checked: the Swift 6.3 crash of issue 34 (item 2)
/// happens in the mandatory SIL passes, after type checking succeeded.
@Suite struct DocumentationSnippetTests {
    // MARK: The snippets

    /// One fenced code block of a document.
    struct Snippet: CustomTestStringConvertible, Sendable {
        var document: String
        var line: Int
        var language: String
        var text: String

        var testDescription: String { "\(document):\(line)" }

        var isManifest: Bool { text.hasPrefix("// swift-tools-version:") }
        var isWholeFile: Bool { text.split(separator: "\n").contains { $0.hasPrefix("import ") } }
        /// Why it compiles only on Apple platforms, or `nil`.
        var appleOnly: String? {
            DocumentationSnippetTests.appleOnly.first { text.contains($0.marker) }?.reason
        }
    }

    /// What marks a snippet as needing an Apple platform, and why.
    static let appleOnly: [(marker: String, reason: String)] = [
        (": View", "a SwiftUI view"),
        ("#Preview", "a SwiftUI preview"),
        ("forSecurityApplicationGroupIdentifier", "an App Group container"),
    ]

    /// The package's folder, found from this file's path.
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// README.md and every article of the DocC catalog.
    static let documents: [String] = {
        let catalog = "Sources/TinyStorage/Documentation.docc"
        let articles = (try? FileManager.default.contentsOfDirectory(atPath: packageRoot.path + "/" + catalog)) ?? []
        return ["README.md"] + articles.filter { $0.hasSuffix(".md") }.sorted().map { "\(catalog)/\($0)" }
    }()

    /// Every fenced code block of every document.
    static let snippets: [Snippet] = documents.flatMap { document -> [Snippet] in
        let text = (try? String(contentsOf: packageRoot.appendingPathComponent(document), encoding: .utf8)) ?? ""
        var found: [Snippet] = []
        var open: Snippet?
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            guard line.hasPrefix("```") else {
                open?.text += line + "\n"
                continue
            }
            if let finished = open {
                found.append(finished)
                open = nil
            } else {
                open = Snippet(document: document, line: index + 1, language: String(line.dropFirst(3)), text: "")
            }
        }
        return found
    }

    static let swiftSnippets = snippets.filter { $0.language == "swift" }

    /// The Swift snippets this platform can compile.
    static var compilableHere: [Snippet] {
        #if canImport(SwiftUI)
        swiftSnippets
        #else
        swiftSnippets.filter { $0.appleOnly == nil }
        #endif
    }

    @Test func theDocumentsAreFoundAndHoldSwiftSnippets() {
        #expect(Self.documents.count >= 11, "\(Self.documents)")
        #expect(Self.swiftSnippets.count >= 25)
        #expect(Self.swiftSnippets.contains { $0.isManifest })
    }

    /// Issue 34, item 1: the README's install manifest can be pasted as it is. It is loaded by
    /// ``compilesAsPrinted(_:)``; here it names this package's product and tools version, and the
    /// README says which Swift that version needs.
    @Test func theInstallManifestMatchesThisPackage() throws {
        let manifest = try #require(Self.swiftSnippets.first { $0.document == "README.md" && $0.isManifest })
        let package = try String(contentsOf: Self.packageRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
        let toolsVersion = try #require(package.split(separator: "\n").first)
        #expect(manifest.text.hasPrefix(toolsVersion + "\n"), "\(toolsVersion)")
        let readme = try String(contentsOf: Self.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let version = toolsVersion.split(separator: " ").last.map(String.init) ?? "?"
        #expect(readme.contains("`swift-tools-version: \(version)`, so it needs Swift \(version) or later"))
        #expect(package.contains(#".library(name: "TinyStorage""#))
        #expect(manifest.text.contains(#".product(name: "TinyStorage", package: "TinyStorage")"#))
        #expect(!manifest.text.contains("<"), "a placeholder in the manifest")
    }

    /// A block without a language would be skipped silently: every one says what it is.
    @Test func everyCodeBlockNamesItsLanguage() {
        for snippet in Self.snippets {
            #expect(
                ["swift", "shell", "sh"].contains(snippet.language),
                "\(snippet.testDescription): ```\(snippet.language)")
        }
    }

    /// Two documents that each declare a type of the same name confuse a reader who uses both
    /// (issue 34, item 10: two `Account`s): a top-level type is declared in one snippet only.
    @Test func noTwoSnippetsDeclareATypeOfTheSameName() throws {
        // NB: unindented only: a type nested in another (`Theme` in `Preferences` and in
        // `Settings`) may share a name.
        let declaration = try Regex(#"(?m)^(?:final\s+)?(?:struct|enum|class|actor|protocol)\s+(\w+)"#)
        var declaredBy: [String: [String]] = [:]
        for snippet in Self.swiftSnippets {
            for match in snippet.text.matches(of: declaration) {
                guard let name = match.output[1].substring else { continue }
                declaredBy[String(name), default: []].append(snippet.testDescription)
            }
        }
        #expect(declaredBy.count >= 10, "\(declaredBy.keys.sorted())")
        for (name, places) in declaredBy {
            #expect(places.count == 1, "\(name) is declared by \(places)")
        }
    }

    @Test(arguments: compilableHere)
    func compilesAsPrinted(_ snippet: Snippet) throws {
        let failure: String?
        if snippet.isManifest {
            failure = try Self.loadManifest(snippet.text)
        } else {
            failure = try Self.compile(snippet.text, appleOnly: snippet.appleOnly != nil)
        }
        #expect(failure == nil, "\(snippet.testDescription) does not compile as printed:\n\(failure ?? "")")
    }

    /// The snippets left out here are exactly the ones that need an Apple framework.
    @Test func onlySnippetsThatNeedAnAppleFrameworkAreLeftOut() {
        let leftOut = Set(Self.swiftSnippets.map(\.testDescription)).subtracting(
            Self.compilableHere.map(\.testDescription))
        for description in leftOut {
            let snippet = Self.swiftSnippets.first { $0.testDescription == description }
            #expect(snippet?.appleOnly != nil, "\(description) is left out without a reason")
        }
        #if !canImport(SwiftUI)
        #expect(leftOut.count <= 4, "Apple-only snippets here: \(leftOut.sorted())")
        #endif
    }

    /// Issue 34, item 2, exactly as reported: with `throws(TinyStorageError)` on `value(for:)`,
    /// Swift 6.3 crashed (signal 11) compiling this, where the catch clauses are not exhaustive
    /// and the errors it does not catch leave through a function that throws `any Error`.
    @Test(arguments: ["top-level code", "a throwing function"])
    func theIdiomThatCrashedSwift63Compiles(context: String) throws {
        let body = """
            do {
                let s = try storage.value(for: .streak)
                print("\\(s)")
            } catch TinyStorageError.Code.unavailable {
                print("unavailable")
            }
            """
        let code =
            context == "top-level code"
            ? body
            : "func show() throws {\n" + body.split(separator: "\n").map { "    " + $0 }.joined(separator: "\n") + "\n}"
        let failure = try Self.compile(code, appleOnly: false)
        #expect(failure == nil, "\(failure ?? "")")
    }

    // MARK: What fragments may use without declaring

    /// A declaration a fragment may use without declaring it.
    struct ContextEntry {
        /// Where the snippet uses it.
        var uses: String
        /// Where the snippet declares it itself (then the entry is left out).
        var declaredBy: String
        var source: String
    }

    static let context: [ContextEntry] = [
        ContextEntry(
            uses: #"\bstorage\b"#, declaredBy: #"\b(let|var)\s+storage\b"#,
            source: "let storage = TinyStorage.inMemory()"),
        ContextEntry(
            uses: #"\bsupport\b"#, declaredBy: #"\b(let|var)\s+support\b"#,
            source: "let support = FileManager.default.temporaryDirectory"),
        ContextEntry(
            uses: #"\.streak\b"#, declaredBy: #"static var streak\b"#,
            source:
                #"extension TinyStorage.Key where Value == Int { static var streak: Self { .init("streak", default: 0) } }"#
        ),
        ContextEntry(
            uses: #"\.appStorage\b"#, declaredBy: #"static let appStorage\b"#,
            source: "extension TinyStorage { static let appStorage = TinyStorage.inMemory() }"),
        ContextEntry(
            uses: #"\.settings\b"#, declaredBy: #"static var settings\b"#,
            source: #"""
                extension TinyStorage.Key where Value == Settings {
                    static var settings: Self { .init("settings", default: Settings()) }
                }
                """#),
        ContextEntry(
            uses: #"\bSettings\b"#, declaredBy: #"struct Settings\b"#,
            source: """
                struct Settings: Codable, Sendable {
                    enum Theme: String, Codable, Sendable { case light, dark, system }
                    var theme = Theme.system
                    init() {}
                    init(upgrading old: SettingsV2) {}
                }
                """),
        ContextEntry(
            uses: #"\bSettingsV2\b"#, declaredBy: #"struct SettingsV2\b"#,
            source: "struct SettingsV2: Codable, Sendable { init(upgrading old: SettingsV1) {} }"),
        ContextEntry(
            uses: #"\bSettingsV1\b"#, declaredBy: #"struct SettingsV1\b"#,
            source: "struct SettingsV1: Codable, Sendable {}"),
    ]

    /// The context declarations `code` needs, and the ones they need in turn.
    static func contextSource(for code: String) throws -> String {
        var included: [Int] = []
        var pending = [code]
        while let text = pending.popLast() {
            for (index, entry) in context.enumerated() where !included.contains(index) {
                // NB: simple word boundaries: by Unicode's rules `storage.store` is one word.
                let uses = try Regex(entry.uses).wordBoundaryKind(.simple)
                let declares = try Regex(entry.declaredBy).wordBoundaryKind(.simple)
                guard text.contains(uses), !code.contains(declares) else { continue }
                included.append(index)
                pending.append(entry.source)
            }
        }
        return included.sorted().map { context[$0].source }.joined(separator: "\n\n")
    }

    // MARK: Compiling

    /// The folder of the build products this test runs from: where `tinystorage` is.
    static let buildFolder = CLISandbox.executable?.deletingLastPathComponent()

    /// Compiles `code` as the `main.swift` of a module of its own, with the context it needs;
    /// returns the compiler's errors, or `nil` when it compiled.
    static func compile(_ code: String, appleOnly: Bool) throws -> String? {
        let build = try #require(buildFolder, "the build folder (beside `tinystorage`) was not found")
        let modules = build.appendingPathComponent("Modules")
        try #require(
            FileManager.default.fileExists(atPath: modules.appendingPathComponent("TinyStorage.swiftmodule").path),
            "the TinyStorage module is not in \(modules.path)")
        let folder = FileManager.default.temporaryDirectory
            .appendingPathComponent("tinystorage-snippet-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        var header = ""
        if !code.split(separator: "\n").contains(where: { $0.hasPrefix("import ") }) {
            header = "import Foundation\nimport TinyStorage\n"
            if code.contains("@Test") || code.contains("#expect") { header += "import Testing\n" }
            if appleOnly && (code.contains("View") || code.contains("#Preview")) { header += "import SwiftUI\n" }
        }
        let main = folder.appendingPathComponent("main.swift")
        try (header + code).write(to: main, atomically: true, encoding: .utf8)
        var files = [main.path]
        let context = try contextSource(for: code)
        if !context.isEmpty {
            let file = folder.appendingPathComponent("Context.swift")
            try ("import Foundation\nimport TinyStorage\n\n" + context + "\n").write(
                to: file, atomically: true, encoding: .utf8)
            files.append(file.path)
        }
        let arguments =
            [
                "-swift-version", "6", "-warnings-as-errors", "-wmo", "-emit-sil", "-o", "/dev/null", "-module-name",
                "Snippet", "-I", modules.path,
                "-Xcc",
                "-fmodule-map-file=" + build.appendingPathComponent("CTinyStorageShims.build/module.modulemap").path,
            ] + platformArguments + files
        let (status, output) = try run(swiftc, arguments, in: folder)
        return status == 0 ? nil : "exit \(status)\n" + output
    }

    /// Loads `manifest` as a package's Package.swift with `swift package dump-package`; returns
    /// its errors, or `nil` when it loaded.
    static func loadManifest(_ manifest: String) throws -> String? {
        let folder = FileManager.default.temporaryDirectory
            .appendingPathComponent("tinystorage-manifest-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try manifest.write(to: folder.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)
        let (status, output) = try run(swift, ["package", "dump-package"], in: folder)
        return status == 0 ? nil : "exit \(status)\n" + output
    }

    #if os(macOS)
    static let swiftc = ["/usr/bin/xcrun", "--sdk", "macosx", "swiftc"]
    static let swift = ["/usr/bin/xcrun", "swift"]
    /// The target the package builds for (its manifest's minimum, macOS 14).
    static var platformArguments: [String] {
        #if arch(arm64)
        ["-target", "arm64-apple-macosx14.0"]
        #else
        ["-target", "x86_64-apple-macosx14.0"]
        #endif
    }
    #else
    static let swiftc = ["/usr/bin/env", "swiftc"]
    static let swift = ["/usr/bin/env", "swift"]
    static let platformArguments: [String] = []
    #endif

    /// Runs `command + arguments` in `folder`; its exit status and its output, both streams.
    static func run(_ command: [String], _ arguments: [String], in folder: URL) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst()) + arguments
        process.currentDirectoryURL = folder
        let output = folder.appendingPathComponent("output.txt")
        try #require(FileManager.default.createFile(atPath: output.path, contents: nil))
        let handle = try FileHandle(forWritingTo: output)
        defer { try? handle.close() }
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        let text = String(decoding: try Data(contentsOf: output), as: UTF8.self)
        // NB: a crash of the compiler is an exit status too (signal 11 is 139 through the driver).
        return (process.terminationReason == .exit ? process.terminationStatus : 128 + process.terminationStatus, text)
    }
}
