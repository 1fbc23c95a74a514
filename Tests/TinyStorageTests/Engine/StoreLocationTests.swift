import Foundation
import Testing

@testable import TinyStorage

/// A store's paths are joined as strings once, at init (see `StoreLocation`): they must name
/// exactly what the URLs the public API hands out name, for every directory and name a caller
/// may pass, or the store would open one folder and report another.
@Suite struct StoreLocationTests {
    static let directories: [URL] = [
        URL(fileURLWithPath: "/tmp/stores"), URL(fileURLWithPath: "/tmp/stores/"), URL(fileURLWithPath: "/"),
        URL(fileURLWithPath: "relative/stores"), URL(fileURLWithPath: "/tmp/with space"),
        URL(fileURLWithPath: "/tmp/ü/ñ"), URL(fileURLWithPath: "/tmp/a/../b"), URL(fileURLWithPath: "/tmp/./a"),
        URL(fileURLWithPath: "/tmp//double"), URL(fileURLWithPath: "/tmp/50%"), URL(fileURLWithPath: "/tmp/a#b;c?d"),
        URL(string: "file:///tmp/encoded%20space/")!, URL(string: "file:///tmp/encoded%3Fquestion")!,
        URL(fileURLWithPath: "sub", relativeTo: URL(fileURLWithPath: "/base/")),
    ]
    static let names = [
        "settings", "with space", "50%", "%2F", "ü", "e\u{301}", "q?x", "h#x", "semi;colon", "...", ".hidden", "x:y",
        "tab\tname", "new\nline", "~",
    ]

    @Test(arguments: directories)
    func pathsAreThoseOfTheURLs(directory: URL) {
        for name in Self.names {
            let location = StoreLocation(insideDirectory: directory, name: name)
            let folder = directory.appendingPathComponent(name, isDirectory: true)
            #expect(location.directory == folder)
            #expect(location.directoryPath == folder.path, "\(directory) + \(name.debugDescription)")
            #expect(location.dataPath == folder.appendingPathComponent("store.tinystorage").path)
            #expect(location.lockPath == folder.appendingPathComponent("store.lock").path)
            #expect(location.dataFile.path == location.dataPath)
            // What the folder is opened as: its parent and its last component.
            #expect(location.parentPath == folder.deletingLastPathComponent().path)
            #expect(location.folderName == folder.lastPathComponent)
        }
    }

    @Test func anInvalidNameGetsAPlaceholderFolderThatIsNeverCreated() {
        let directory = URL(fileURLWithPath: "/tmp/stores")
        let location = StoreLocation(insideDirectory: directory, name: "../escape")
        #expect(location.folderName == "invalid-store-name")
        #expect(location.directoryPath == "/tmp/stores/invalid-store-name")
        #expect(throws: TinyStorageError.self) { try StoreLocation.validate(name: "../escape") }
    }

    @Test func theStoreReportsTheURLsItOpened() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "location-\(UUID().uuidString) with space", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = TinyStorage(insideDirectory: directory, name: "50% e\u{301}")
        try storage.write(1, forKey: "k", writeID: nil)
        #expect(FileManager.default.fileExists(atPath: storage.fileURL.path))
        #expect(storage.directoryURL == directory.appendingPathComponent("50% e\u{301}", isDirectory: true))
        #expect(storage.fileURL == storage.directoryURL.appendingPathComponent("store.tinystorage"))
    }
}
