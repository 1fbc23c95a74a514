import Foundation
import Testing

@testable import TinyStorage

/// G8 for the files `FilePermissionTests` does not look at: everything the library creates is
/// readable by its owner only — quarantine copies and their folder, files rebuilt by a salvage,
/// files created by adoption or an explicit compaction, and every folder it creates on the way to
/// the store.
@Suite struct PrivateFilesTests {
    /// Every file below `directory` must be 0600 and every folder 0700.
    func expectOwnerOnly(below directory: URL, sourceLocation: SourceLocation = #_sourceLocation) throws {
        for path in allPaths(below: directory) {
            let url = directory.appendingPathComponent(path)
            var isDirectory: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory)
            let expected = isDirectory.boolValue ? 0o700 : 0o600
            let actual = try permissions(url)
            #expect(
                actual == expected, "\(path) is \(String(actual, radix: 8)), not \(String(expected, radix: 8))",
                sourceLocation: sourceLocation)
        }
    }

    @Test func aSalvagedStoreAndItsQuarantineAreOwnerOnly() throws {
        try withTemporaryDirectory { directory throws in
            let fileURL = try makeStore(in: directory, values: streakValues)
            var bytes = try Data(contentsOf: fileURL)
            bytes[LogFormat.headerSize + 12] ^= 0xFF  // the first record: later ones still verify
            try bytes.write(to: fileURL)
            try #require(chmod(fileURL.path, 0o644) == 0)  // as a careless copy would leave it

            let storage = openStore(directory)
            #expect(storage.recoveryReports.count == 1)
            let quarantined = try #require(quarantineFiles(of: storage).first)
            #expect(try permissions(quarantined) == 0o600)
            #expect(try permissions(quarantined.deletingLastPathComponent()) == 0o700)
            #expect(try permissions(storage.fileURL) == 0o600, "the rebuilt data file")
            try expectOwnerOnly(below: storage.directoryURL)
        }
    }

    @Test func anAdoptedStoreIsOwnerOnly() throws {
        try withTemporaryDirectory { parent throws in
            let folder = parent.appendingPathComponent("store", isDirectory: true)
            try FileManager.default.createDirectory(
                at: folder, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            let plist = try PropertyListSerialization.data(
                fromPropertyList: ["streak": Data("364".utf8)], format: .binary, options: 0)
            let original = folder.appendingPathComponent("tiny-storage.plist")
            try plist.write(to: original)
            try #require(chmod(original.path, 0o600) == 0)

            let storage = openStore(parent)
            #expect(storage.integer(forKey: "streak") == 364)
            try expectOwnerOnly(below: folder)
        }
    }

    @Test func anExplicitCompactionKeepsTheStoreOwnerOnly() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            for round in 0..<10 { try storage.storeOrThrow(round, forKey: "k") }
            try storage.compactNow()
            try expectOwnerOnly(below: storage.directoryURL)
        }
    }

    @Test func everyFolderCreatedOnTheWayToTheStoreIsOwnerOnly() throws {
        try withTemporaryDirectory { sandbox throws in
            let inside = sandbox.appendingPathComponent("a/b/c", isDirectory: true)
            let storage = openStore(inside)
            try storage.storeOrThrow(1, forKey: "k")
            for folder in ["a", "a/b", "a/b/c", "a/b/c/store"] {
                let mode = try permissions(sandbox.appendingPathComponent(folder))
                #expect(mode == 0o700, "\(folder) is \(String(mode, radix: 8))")
            }
            try expectOwnerOnly(below: storage.directoryURL)
            #expect(openStore(inside).integer(forKey: "k") == 1)
        }
    }
}
