import Foundation
import Testing

@testable import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue 33, item 1: a store opened with `access: .readOnly` reads, follows other instances'
/// commits and announces them, and creates and writes nothing: every write throws `.readOnly`,
/// and the store's folder keeps every byte and every time stamp. (Another user with read
/// permission only, in a real process: `IntegrationTests/ReadOnlyAccessTests.swift`.)
@Suite struct ReadOnlyAccessTests {
    /// Every byte of every item below `directory`, the lock file (but its change signal) and the
    /// durable mark included, with its permissions and its modification and change times: what a
    /// read-only store must leave exactly as it was. (Access times are left out: reading sets them.)
    struct ExactSnapshot: Equatable {
        struct Item: Equatable {
            var mode: UInt32
            var modified: timespec
            var changed: timespec
            var contents: Data?

            static func == (lhs: Item, rhs: Item) -> Bool {
                lhs.mode == rhs.mode && lhs.contents == rhs.contents
                    && (lhs.modified.tv_sec, lhs.modified.tv_nsec) == (rhs.modified.tv_sec, rhs.modified.tv_nsec)
                    && (lhs.changed.tv_sec, lhs.changed.tv_nsec) == (rhs.changed.tv_sec, rhs.changed.tv_nsec)
            }
        }

        var items: [String: Item] = [:]

        init(_ directory: URL) throws {
            var paths = [""]
            let enumerator = FileManager.default.enumerator(atPath: directory.path)
            while let relative = enumerator?.nextObject() as? String { paths.append(relative) }
            for relative in paths {
                let path = relative.isEmpty ? directory.path : directory.appendingPathComponent(relative).path
                var info = stat()
                try #require(lstat(path, &info) == 0, "lstat \(path): errno \(errno)")
                let isFile = (info.st_mode & S_IFMT) == S_IFREG
                #if canImport(Darwin)
                let (modified, changed) = (info.st_mtimespec, info.st_ctimespec)
                #else
                let (modified, changed) = (info.st_mtim, info.st_ctim)
                #endif
                var contents = isFile ? try Data(contentsOf: URL(fileURLWithPath: path)) : nil
                if relative == "store.lock", var page = contents, page.count >= 72 {
                    // NB: the change signal and its sleepers flag, which the read-write instance's
                    // own watch thread moves whenever it goes to sleep (the real-process test, with
                    // no writer running, compares these bytes too).
                    page.replaceSubrange(64..<72, with: Data(count: 8))
                    contents = page
                }
                items[relative] = Item(
                    mode: UInt32(info.st_mode), modified: modified, changed: changed, contents: contents)
            }
        }
    }

    /// A store written by a read-write instance (synchronized, so nothing is left to flush), and
    /// a read-only instance of it.
    static func makeStores(
        in directory: URL, logger: TestLogger = TestLogger()
    ) throws -> (writer: TinyStorage, reader: TinyStorage) {
        let writer = openStore(directory)
        try writer.storeOrThrow(364, forKey: "streak")
        try writer.storeOrThrow("ada", forKey: "name")
        try writer.storeOrThrow(Data([1, 2, 3]), forKey: "avatar")
        try writer.synchronize()
        var options = Engine.Options()
        options.readOnly = true
        let reader = openStore(directory, logger: logger, options: options)
        return (writer, reader)
    }

    /// A new directory under the temporary directory, for the async tests.
    static func makeTemporaryDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("TinyStorageTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    @Test func aReadOnlyStoreReadsEveryKeyAndSaysItIsReadOnly() throws {
        try withTemporaryDirectory { directory throws in
            let (writer, reader) = try Self.makeStores(in: directory)
            #expect(reader.access == .readOnly)
            #expect(writer.access == .readWrite)
            #expect(Set(reader.allKeys.map(\.rawValue)) == ["streak", "name", "avatar"])
            #expect(try reader.retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
            #expect(reader.retrieve(type: String.self, forKey: "name") == "ada")
            #expect(reader.retrieve(type: Data.self, forKey: "avatar") == Data([1, 2, 3]))
            #expect(reader.availability.isAvailable)
            #expect(try reader.statistics.keyCount == 3)
        }
    }

    @Test func everyWriteThrowsReadOnlyOrLogsItAndTheFolderKeepsEveryByteAndTime() throws {
        try withTemporaryDirectory { directory throws in
            let logger = TestLogger()
            let (_, reader) = try Self.makeStores(in: directory, logger: logger)
            _ = reader.allKeys  // opened
            let folder = directory.appendingPathComponent("store")
            let before = try ExactSnapshot(folder)
            for (name, write) in WriteBarrierTests.throwingWrites {
                let error = expectError(.readOnly) { try write(reader) }
                #expect(error?.message.contains("read-only") == true, "\(name)")
            }
            for (name, write) in WriteBarrierTests.plainWrites {
                let logged = logger.texts(atLeast: .error).count
                write(reader)
                #expect(logger.texts(atLeast: .error).count > logged, "\(name) logged nothing")
            }
            try reader.synchronize()  // nothing to flush: no error, no write
            #expect(try ExactSnapshot(folder) == before)
            #expect(reader.retrieve(type: Int.self, forKey: "streak") == 364)
        }
    }

    @Test func aReadOnlyStoreSeesAndAnnouncesAnotherInstancesCommitsAndReplacedFiles() async throws {
        let directory = try Self.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (writer, reader) = try Self.makeStores(in: directory)
        _ = reader.allKeys
        let changes = reader.values(forKey: "streak", as: Int.self)
        var iterator = changes.makeAsyncIterator()
        #expect(await iterator.next() == .some(364))

        try writer.storeOrThrow(365, forKey: "streak")
        #expect(await iterator.next() == .some(365), "announced without a read asking for it")
        #expect(reader.retrieve(type: Int.self, forKey: "streak") == 365)

        // A compaction replaces the file; the reader reads the new one.
        try writer.compactNow()
        try writer.storeOrThrow(366, forKey: "streak")
        #expect(await iterator.next() == .some(366))
        #expect(reader.retrieve(type: String.self, forKey: "name") == "ada")
    }

    @Test func aReadOnlyStoreCreatesNothingWhereThereIsNoStoreAndOpensOnceAWriterHas() async throws {
        let directory = try Self.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let parent = directory.appendingPathComponent("parent")
        var options = Engine.Options()
        options.readOnly = true
        let reader = openStore(parent, options: options)
        let error = expectError(.unavailable) { try reader.retrieveOrThrow(type: Int.self, forKey: "streak") }
        #expect(error?.message.contains("read-only") == true)
        #expect(!FileManager.default.fileExists(atPath: parent.path), "the read-only store created its parent")

        try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
        let writer = openStore(parent)
        try writer.storeOrThrow(1, forKey: "streak")
        try await reader.waitUntilAvailable(timeout: .seconds(30))
        #expect(try reader.retrieveOrThrow(type: Int.self, forKey: "streak") == 1)
    }

    @Test func aDamagedStoreIsUnavailableReadOnlyUntouchedAndReadAfterAWriterRepairedIt() throws {
        try withTemporaryDirectory { directory throws in
            let (writer, _) = try Self.makeStores(in: directory)
            let fileURL = writer.fileURL
            // A byte of the second record's payload flipped: damage a writer repairs.
            var bytes = try Data(contentsOf: fileURL)
            bytes[LogFormat.headerSize + 40] ^= 0xFF
            try bytes.write(to: fileURL)
            let folder = directory.appendingPathComponent("store")
            var options = Engine.Options()
            options.readOnly = true
            let before = try ExactSnapshot(folder)
            let reader = openStore(directory, options: options)
            expectError(.unavailable) { try reader.retrieveOrThrow(type: Int.self, forKey: "streak") }
            #expect(reader.retrieve(type: String.self, forKey: "name") == nil, "nothing invented")
            #expect(try ExactSnapshot(folder) == before, "a read-only store repaired or set aside bytes")

            // A new writer repairs it (quarantining what failed); the reader then reads what verified.
            _ = openStore(directory).allKeys
            #expect(throws: Never.self) { try reader.statistics }
        }
    }

    @Test func aFolderOfAnotherUserIsReadReadOnlyButRefusedReadWrite() throws {
        try withTemporaryDirectory { directory throws in
            let (_, _) = try Self.makeStores(in: directory)
            let other = OtherUserFileSystem()
            var options = Engine.Options()
            options.readOnly = true
            let reader = openStore(directory, io: FileIO(fileSystem: other), options: options)
            #expect(reader.retrieve(type: Int.self, forKey: "streak") == 364)
            let writer = openStore(directory, io: FileIO(fileSystem: other))
            expectError(.unavailable) { try writer.retrieveOrThrow(type: Int.self, forKey: "streak") }
            guard case .unavailable(let error) = writer.availability else {
                Issue.record("a read-write store opened a folder of another user")
                return
            }
            #expect(error.code == .unsafeFile, "\(error)")
        }
    }

    /// The permission bits of the item at `url`.
    static func mode(_ url: URL) throws -> Int {
        try #require(FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? Int)
    }

    @Test(arguments: [
        (TinyStorage.Readers.ownerOnly, 0o600, 0o700), (.ownerAndGroup, 0o640, 0o750), (.everyone, 0o644, 0o755),
    ])
    func theFilesAStoreCreatesAreReadableByWhomItSays(readers: TinyStorage.Readers, file: Int, folder: Int) throws {
        try withTemporaryDirectory { directory throws in
            var options = Engine.Options()
            options.sharedReading = readers.sharedReading
            let writer = openStore(directory, options: options)
            try writer.storeOrThrow(364, forKey: "streak")
            let mask = Int(Self.creationMask)
            let lockFile = writer.directoryURL.appendingPathComponent("store.lock")
            #expect(try Self.mode(writer.directoryURL) == folder & ~mask)
            #expect(try Self.mode(writer.fileURL) == file & ~mask)
            #expect(try Self.mode(lockFile) == file & ~mask)
            // A compaction's new file too, whatever the file it replaces allowed.
            try FileManager.default.setAttributes([.posixPermissions: 0o666], ofItemAtPath: writer.fileURL.path)
            try writer.compactNow()
            #expect(try Self.mode(writer.fileURL) == file & ~mask)
        }
    }

    /// The process's file creation mask, which applies to the files a store creates.
    static let creationMask: mode_t = {
        let mask = umask(0o022)
        umask(mask)
        return mask
    }()
}

/// The system's file system, as seen by a process of another user: it reports an effective user
/// that owns none of the store's files.
struct OtherUserFileSystem: ForwardingFileSystem {
    let base: any FileSystem = SystemFileSystem()
    var effectiveUserID: UInt32 { base.effectiveUserID &+ 4242 }
}
