import Foundation
import Testing

@testable import TinyStorage

/// Issue 10, defect 6, through the file-system seam: on Apple platforms a file takes, when it is
/// created, the protection class its directory gives new files. Every directory the store creates
/// is created unprotected, and every directory it opens has its class checked (and removed when it
/// has one) before a file is created in it: so every file the store creates — data file, lock
/// file, compaction and salvage output, quarantine copies — is readable before first unlock, from
/// its creation on.
@Suite struct DataProtectionSeamTests {
    /// Checks `events` in order: each file is created in a directory whose protection was
    /// checked, or that was created, before.
    func expectEveryFileCreatedInAnUnprotectedDirectory(_ events: [RecordingFileSystem.Event]) {
        var unprotected = Set<String>()
        var creations = 0
        for event in events {
            switch event {
            case .createdDirectory(let path), .checkedDataProtection(let path):
                unprotected.insert(path)
            case .createdFile(let directory, let name):
                creations += 1
                #expect(
                    unprotected.contains(directory), "\(name) was created in \(directory) before it was unprotected")
            default:
                break
            }
        }
        #expect(creations > 0)
    }

    @Test func everyFileTheStoreCreatesIsCreatedInAnUnprotectedDirectory() throws {
        try withTemporaryDirectory { directory throws in
            let fileSystem = RecordingFileSystem()
            let io = FileIO(fileSystem: fileSystem)
            // A store folder made by the app, holding the original TinyStorage's file to adopt.
            let folder = directory.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
            try PropertyListSerialization.data(
                fromPropertyList: ["streak": Data("364".utf8)], format: .binary, options: 0
            )
            .write(to: folder.appendingPathComponent("tiny-storage.plist"))

            let storage = openStore(directory, durability: .immediate, io: io)
            #expect(storage.integer(forKey: "streak") == 364)
            for index in 0..<10 { try storage.storeOrThrow(index, forKey: "k\(index)") }
            try storage.compactNow()
            var bytes = try Data(contentsOf: storage.fileURL)
            bytes[bytes.count / 2] ^= 0x40
            try (bytes + Data([9, 0, 0, 0, 1])).write(to: storage.fileURL)
            let repaired = openStore(directory, io: io)
            #expect(!repaired.recoveryReports.isEmpty)
            try repaired.storeOrThrow(1, forKey: "after")

            let events = fileSystem.events
            expectEveryFileCreatedInAnUnprotectedDirectory(events)
            let created = events.compactMap { event -> String? in
                guard case .createdFile(_, let name) = event else { return nil }
                return name
            }
            #expect(created.contains("store.lock"))
            #expect(created.contains { $0.hasPrefix(".store.tinystorage.") }, "new and compacted files")
            #expect(created.contains { $0.hasPrefix(".damaged-file.") }, "quarantine copies")
            #expect(events.contains(.checkedDataProtection(path: folder.path)), "the app's folder was not checked")
        }
    }

    @Test func aNewStoreCreatesItsFolderUnprotected() throws {
        try withTemporaryDirectory { directory throws in
            let fileSystem = RecordingFileSystem()
            let storage = openStore(directory, io: FileIO(fileSystem: fileSystem))
            try storage.storeOrThrow(1, forKey: "k")
            let events = fileSystem.events
            #expect(events.contains(.createdDirectory(path: directory.path + "/store")))
            expectEveryFileCreatedInAnUnprotectedDirectory(events)
        }
    }
}
