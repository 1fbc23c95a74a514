import Foundation
import Testing

@testable import TinyStorage

/// G8: files are private to their owner.
@Suite struct FilePermissionTests {
    @Test func newStoreFilesAreOwnerOnly() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow(1, forKey: "k")
            #expect(try permissions(storage.directoryURL) == 0o700)
            #expect(try permissions(storage.fileURL) == 0o600)
            #expect(try permissions(storage.directoryURL.appendingPathComponent("store.lock")) == 0o600)
            #expect(storage.directoryURL.lastPathComponent == "store")
            #expect(storage.fileURL.lastPathComponent == "store.tinystorage")
            #expect(
                storage.fileURL.deletingLastPathComponent().standardizedFileURL
                    == storage.directoryURL.standardizedFileURL)
        }
    }

    /// The modes above are what the files end up with under the test run's umask, which could
    /// hide a wider mode asked for: the modes the store asks `open(2)` and `mkdir(2)` for are
    /// checked here, whatever the umask.
    @Test func everyFileAndFolderIsCreatedAskingForOwnerOnlyModes() throws {
        try withTemporaryDirectory { sandbox throws in
            let recording = ModeRecordingFileSystem()
            let inside = sandbox.appendingPathComponent("app-support/inner", isDirectory: true)
            let storage = openStore(inside, io: FileIO(fileSystem: recording))
            for round in 0..<10 { try storage.storeOrThrow(round, forKey: "k") }
            try storage.compactNow()
            var bytes = try Data(contentsOf: storage.fileURL)
            bytes[bytes.count - 2] ^= 0x40
            try bytes.write(to: storage.fileURL)
            #expect(!openStore(inside, io: FileIO(fileSystem: recording)).recoveryReports.isEmpty)

            let created = recording.created
            #expect(created.files.count >= 4, "data file, lock file, compacted file, quarantine copy: \(created)")
            #expect(created.directories.count >= 4, "app-support, inner, store, quarantine: \(created)")
            #expect(created.files.allSatisfy { $0.mode == 0o600 }, "\(created.files)")
            #expect(created.directories.allSatisfy { $0.mode == 0o700 }, "\(created.directories)")
        }
    }

    /// The real file system, recording the mode asked for each file created (`O_CREAT`) and
    /// each folder made.
    final class ModeRecordingFileSystem: ForwardingFileSystem, Sendable {
        struct Creation: CustomStringConvertible {
            let name: String
            let mode: mode_t

            var description: String { "\(name) \(String(mode, radix: 8))" }
        }

        let base: any FileSystem = SystemFileSystem()
        private let recorded = Locked<(files: [Creation], directories: [Creation])>(([], []))

        var created: (files: [Creation], directories: [Creation]) { recorded.withLock { $0 } }

        func open(in directory: Int32, _ name: String, flags: Int32, mode: mode_t) -> Result<Int32, Errno> {
            if flags & O_CREAT != 0 { recorded.withLock { $0.files.append(Creation(name: name, mode: mode)) } }
            return base.open(in: directory, name, flags: flags, mode: mode)
        }

        func makeDirectory(atPath path: String, mode: mode_t) -> Result<Void, Errno> {
            recorded.withLock { $0.directories.append(Creation(name: path, mode: mode)) }
            return base.makeDirectory(atPath: path, mode: mode)
        }

        func makeDirectory(in directory: Int32, _ name: String, path: String, mode: mode_t) -> Result<Void, Errno> {
            recorded.withLock { $0.directories.append(Creation(name: path, mode: mode)) }
            return base.makeDirectory(in: directory, name, path: path, mode: mode)
        }
    }

    @Test func storeFilesStayOwnerOnlyAfterCompaction() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let generation = try headerGeneration(storage.fileURL)
            let filler = String(repeating: "p", count: 8 << 10)
            var round = 0
            while try headerGeneration(storage.fileURL) == generation {
                try storage.storeOrThrow("\(round)" + filler, forKey: "filler")
                round += 1
                try #require(round < 1_000, "no compaction after \(round) large overwrites")
            }
            #expect(try permissions(storage.fileURL) == 0o600)
            #expect(try permissions(storage.directoryURL) == 0o700)
        }
    }
}
