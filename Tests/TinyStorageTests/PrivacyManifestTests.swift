import Foundation
import Testing

@testable import TinyStorage

/// `PrivacyInfo.xcprivacy`, the privacy manifest Apple requires of an SDK that calls
/// required-reason APIs, read from the resource bundle SwiftPM builds for the library.
///
/// The manifest is checked against the library's own sources: every required-reason API category
/// the code uses is declared with reasons Apple accepts for it, and nothing else is declared. A
/// new `fstatat`, `systemUptime` or `statfs` in `Sources/` fails here instead of at App Store
/// review, and so does a category the code no longer needs.
@Suite struct PrivacyManifestTests {
    @Test func theManifestDeclaresNoTrackingAndNoCollectedData() throws {
        let manifest = try Self.manifest()
        #expect(manifest["NSPrivacyTracking"] as? Bool == false)
        #expect((manifest["NSPrivacyTrackingDomains"] as? [Any])?.isEmpty == true)
        #expect((manifest["NSPrivacyCollectedDataTypes"] as? [Any])?.isEmpty == true)
        let known: Set = [
            "NSPrivacyTracking", "NSPrivacyTrackingDomains", "NSPrivacyCollectedDataTypes",
            "NSPrivacyAccessedAPITypes",
        ]
        #expect(Set(manifest.keys).subtracting(known).isEmpty, "App Store Connect rejects unexpected keys")
    }

    @Test func theManifestDeclaresExactlyTheRequiredReasonAPIsTheSourcesUse() throws {
        let declared = try Self.declaredReasons()
        let used = try Self.categoriesUsedInSources()
        #expect(
            Set(declared.keys) == Set(used.keys),
            "used in Sources: \(used.map { "\($0.key) (\($0.value.joined(separator: ", ")))" }.sorted())")
        for (name, reasons) in declared {
            let category = try #require(RequiredReasonCategory.all.first { $0.name == name }, "unknown \(name)")
            #expect(!reasons.isEmpty, "\(name) declares no reason")
            #expect(Set(reasons).isSubset(of: category.validReasons), "\(name): \(reasons)")
        }
    }

    @Test(arguments: [
        ("var info = stat(); fstat(fd, &info)", ["NSPrivacyAccessedAPICategoryFileTimestamp"]),
        ("fstatat(directory, name, &info, AT_SYMLINK_NOFOLLOW)", ["NSPrivacyAccessedAPICategoryFileTimestamp"]),
        ("attributes[.modificationDate]", ["NSPrivacyAccessedAPICategoryFileTimestamp"]),
        ("statfs(path, &info)", ["NSPrivacyAccessedAPICategoryDiskSpace"]),
        ("ProcessInfo.processInfo.systemUptime", ["NSPrivacyAccessedAPICategorySystemBootTime"]),
        ("func migrate(userDefaults: UserDefaults)", ["NSPrivacyAccessedAPICategoryUserDefaults"]),
        ("enum UserDefaultsValue { case status(Int) }", []),
        ("io.status(fd) // fstat(2), statfs(2) and UserDefaults in a comment", []),
        ("/* stat(2) */ let x = 1", []),
        ("#if defined(__linux__)\n    fstatfs(fd, &info);\n#else\n    return -1;\n#endif", []),
        (
            "#if defined(__linux__)\n    f();\n#else\n    statfs(path, &info);\n#endif",
            ["NSPrivacyAccessedAPICategoryDiskSpace"]
        ),
    ])
    func theScanRecognizesCallsAndIgnoresComments(code: String, categories: [String]) {
        // NB: the comparison above passes on an empty scan only if the manifest declares nothing.
        let found = RequiredReasonCategory.all.filter {
            Self.withoutLinuxOnlyC(Self.withoutComments(code)).range(of: $0.pattern, options: .regularExpression) != nil
        }
        #expect(found.map(\.name) == categories)
    }

    // MARK: Support

    /// One of Apple's required-reason API categories: the calls that put code in it and the
    /// reason codes Apple accepts, from "Describing use of required reason API".
    struct RequiredReasonCategory {
        var name: String
        var pattern: String
        var validReasons: Set<String>

        static let all = [
            RequiredReasonCategory(
                name: "NSPrivacyAccessedAPICategoryFileTimestamp",
                pattern: #"\b(creationDate|modificationDate|fileModificationDate|contentModificationDateKey|"#
                    + #"creationDateKey)\b|\b(f|l)?stat(at)?\s*\(|\bf?getattrlist(bulk|at)?\s*\("#,
                validReasons: ["DDA9.1", "C617.1", "3B52.1", "0A2A.1"]),
            RequiredReasonCategory(
                name: "NSPrivacyAccessedAPICategorySystemBootTime",
                pattern: #"\bsystemUptime\b|\bmach_absolute_time\b"#,
                validReasons: ["35F9.1", "8FFB.1", "3D61.1"]),
            RequiredReasonCategory(
                name: "NSPrivacyAccessedAPICategoryDiskSpace",
                pattern: #"\bvolume(AvailableCapacity\w*|TotalCapacity)Key\b|\bsystem(Free)?Size\b|"#
                    + #"\bNSFileSystem(Free)?Size\b|\bf?statv?fs\s*\("#,
                validReasons: ["85F4.1", "E174.1", "7D9E.1", "B728.1"]),
            RequiredReasonCategory(
                name: "NSPrivacyAccessedAPICategoryActiveKeyboards",
                pattern: #"\bactiveInputModes\b"#,
                validReasons: ["3EC4.1", "54BD.1"]),
            RequiredReasonCategory(
                name: "NSPrivacyAccessedAPICategoryUserDefaults",
                pattern: #"\b(NS)?UserDefaults\b"#,
                validReasons: ["CA92.1", "1C8F.1", "C56D.1", "AC6B.1"]),
        ]
    }

    /// The manifest as SwiftPM bundled it for the library (`TinyStorage_TinyStorage.resources`
    /// on Linux, `.bundle` on Apple platforms).
    static func manifest() throws -> [String: Any] {
        let url = try #require(
            Bundle.module.url(forResource: "PrivacyInfo", withExtension: "xcprivacy"),
            "PrivacyInfo.xcprivacy is missing from \(Bundle.module.bundlePath)")
        let plist = try PropertyListSerialization.propertyList(from: Data(contentsOf: url), format: nil)
        return try #require(plist as? [String: Any])
    }

    /// Declared category → its reasons.
    static func declaredReasons() throws -> [String: [String]] {
        let entries = try #require(try manifest()["NSPrivacyAccessedAPITypes"] as? [[String: Any]])
        var declared: [String: [String]] = [:]
        for entry in entries {
            let name = try #require(entry["NSPrivacyAccessedAPIType"] as? String)
            #expect(declared[name] == nil, "\(name) is declared twice")
            declared[name] = try #require(entry["NSPrivacyAccessedAPITypeReasons"] as? [String])
        }
        return declared
    }

    /// Category → the files (relative to their target folder) whose code, comments left out,
    /// calls one of its APIs. Scans the library and the C shims linked into it.
    static func categoriesUsedInSources() throws -> [String: [String]] {
        let sources = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources")
        var used: [String: [String]] = [:]
        for target in ["TinyStorage", "CTinyStorageShims"] {
            let root = sources.appendingPathComponent(target)
            let files = try #require(FileManager.default.subpaths(atPath: root.path), "no \(root.path)")
            for file in files.sorted() where [".swift", ".c", ".h"].contains(where: file.hasSuffix) {
                let source = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
                let code = withoutLinuxOnlyC(withoutComments(source))
                for category in RequiredReasonCategory.all
                where code.range(of: category.pattern, options: .regularExpression) != nil {
                    used[category.name, default: []].append(file)
                }
            }
        }
        return used
    }

    /// `source` without the C code between `#if defined(__linux__)` and the next `#else` or
    /// `#endif`: it is not compiled on Apple platforms, so it is no concern of the manifest (the
    /// shims call `fstatfs` there, on Linux only). An `#if` nested inside ends the region early,
    /// which only keeps more code in the scan.
    static func withoutLinuxOnlyC(_ source: String) -> String {
        source.replacingOccurrences(
            of: #"#if defined\(__linux__\)\n[\s\S]*?(?=#else|#endif)"#, with: "", options: .regularExpression)
    }

    /// `source` without `//` line comments and `/* */` block comments (which mention system
    /// calls by name without calling them).
    static func withoutComments(_ source: String) -> String {
        source.replacingOccurrences(of: #"/\*[\s\S]*?\*/"#, with: "", options: .regularExpression)
            .replacingOccurrences(of: #"//[^\n]*"#, with: "", options: .regularExpression)
    }
}
