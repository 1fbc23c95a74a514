import Foundation
import Testing

@testable import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The syscall layer: positional reads and writes, names relative to an open directory, and
/// injected faults.
@Suite struct FileIOTests {
    let io = FileIO.system

    /// Opens `url` as a `FileIO.Directory` for the test's duration, as store folders are opened:
    /// relative to its parent (which only serves as the base of `*at` calls), without following
    /// a link, readable (so it can be listed and synced).
    func withDirectory<R>(_ url: URL, _ body: (FileIO.Directory) throws -> R) throws -> R {
        let parent = try io.openDirectory(atPath: url.deletingLastPathComponent().path).get()
        defer { io.close(parent.fd) }
        let fd = try io.open(in: parent, url.lastPathComponent, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW).get()
        defer { io.close(fd) }
        return try body(FileIO.Directory(fd: fd, path: url.path))
    }

    @Test func writesAndReadsAtOffsets() throws {
        try withTemporaryDirectory { url throws in
            try withDirectory(url) { directory throws in
                let fd = try io.open(in: directory, "file", flags: O_RDWR | O_CREAT, mode: 0o600).get()
                defer { io.close(fd) }
                try [UInt8]("hello world".utf8).withUnsafeBytes { try io.write(fd, $0, at: 0).get() }
                try [UInt8]("WORLD".utf8).withUnsafeBytes { try io.write(fd, $0, at: 6).get() }
                #expect(try io.read(fd, count: 11, at: 0).get() == Array("hello WORLD".utf8))
                #expect(try io.read(fd, count: 100, at: 6).get() == Array("WORLD".utf8), "short only at end of file")
                #expect(try io.read(fd, count: 10, at: 50).get().isEmpty)
                #expect(try io.status(fd).get().size == 11)
                #expect(try io.status(fd).get().isRegularFile)
                try io.truncate(fd, to: 5).get()
                #expect(try io.status(in: directory, "file").get().size == 5)
                try io.allocate(fd, offset: 0, length: 4096).get()
                #expect(try io.status(fd).get().size == 4096)
                #expect(try io.read(fd, count: 5, at: 0).get() == Array("hello".utf8), "allocating keeps the bytes")
                try io.sync(fd).get()
                try io.sync(fd, dataOnly: true).get()
                try io.syncDirectory(directory).get()
            }
        }
    }

    @Test func openingAMissingFileFailsWithNotFound() throws {
        try withTemporaryDirectory { url throws in
            try withDirectory(url) { directory throws in
                #expect(throws: Errno.notFound) { try io.open(in: directory, "missing", flags: O_RDONLY).get() }
                return ()
            }
        }
    }

    @Test func statusDoesNotFollowALinkAndNoFollowRefusesOne() throws {
        try withTemporaryDirectory { url throws in
            try Data("target".utf8).write(to: url.appendingPathComponent("target"))
            try FileManager.default.createSymbolicLink(
                atPath: url.appendingPathComponent("link").path, withDestinationPath: "target")
            try withDirectory(url) { directory throws in
                #expect(try io.status(in: directory, "link").get().kind == .symbolicLink)
                #expect(try io.status(in: directory, "target").get().kind == .regular)
                #expect(throws: Errno.symbolicLinkLoop) {
                    try io.open(in: directory, "link", flags: O_RDONLY | O_NOFOLLOW).get()
                }
            }
        }
    }

    @Test func makeDirectoryReportsAnExistingName() throws {
        try withTemporaryDirectory { url throws in
            try withDirectory(url) { directory throws in
                try io.makeDirectory(in: directory, "sub").get()
                #expect(try permissions(url.appendingPathComponent("sub")) == 0o700)
                #expect(throws: Errno.exists) { try io.makeDirectory(in: directory, "sub").get() }
                #expect(try io.entries(of: directory).get() == ["sub"])
            }
            let nested = url.appendingPathComponent("a/b/c")
            try io.makeDirectories(atPath: nested.path).get()
            try io.makeDirectories(atPath: nested.path).get()
            #expect(try permissions(nested) == 0o700)
        }
    }

    @Test func unlinkIgnoresMissingFilesAndRenameReplaces() throws {
        try withTemporaryDirectory { url throws in
            let a = url.appendingPathComponent("a")
            let b = url.appendingPathComponent("b")
            try withDirectory(url) { directory throws in
                try io.unlink(in: directory, "a").get()
                try Data("A".utf8).write(to: a)
                try Data("B".utf8).write(to: b)
                try io.rename(in: directory, "a", to: "b").get()
                #expect(try Data(contentsOf: b) == Data("A".utf8))
                #expect(!FileManager.default.fileExists(atPath: a.path))
                try io.unlink(in: directory, "b").get()
                #expect(!FileManager.default.fileExists(atPath: b.path))
            }
        }
    }

    @Test(arguments: FileIO.Call.allCases)
    func anInjectedFailureIsReturnedWithoutMakingTheCall(call: FileIO.Call) throws {
        try withTemporaryDirectory { url throws in
            try withDirectory(url) { directory throws in
                let path = directory.path(of: "file")
                let fd = try io.open(in: directory, "file", flags: O_RDWR | O_CREAT).get()
                defer { io.close(fd) }
                try [UInt8]("data".utf8).withUnsafeBytes { try io.write(fd, $0, at: 0).get() }
                let failing = FileIO { candidate, _ in candidate == call ? .fail(.ioError) : nil }
                let result: Result<Void, Errno> =
                    switch call {
                    case .open:
                        failing.open(in: directory, "file", flags: O_RDONLY).map { failing.close($0) }.map { _ in }
                    case .close: failing.close(-1)
                    case .read: failing.read(fd, count: 4, at: 0).map { _ in }
                    case .write: [UInt8]("XXXX".utf8).withUnsafeBytes { failing.write(fd, $0, at: 0) }
                    case .sync: failing.sync(fd)
                    case .syncToDrive:
                        FileIO { candidate, _ in
                            candidate == .sync ? .fail(Errno(ENOTTY)) : candidate == call ? .fail(.ioError) : nil
                        }.syncWhereSupported(fd)
                    case .lock: failing.lock(fd, exclusive: true)
                    case .stat: failing.status(fd).map { _ in }
                    case .rename: failing.rename(in: directory, "file", to: "file.renamed")
                    case .makeDirectory: failing.makeDirectory(in: directory, "file.dir")
                    case .truncate: failing.truncate(fd, to: 0)
                    case .unlink: failing.unlink(in: directory, "file")
                    case .map: failing.mapShared(fd, length: 4096).map { failing.unmap($0, length: 4096) }
                    case .allocate: failing.allocate(fd, offset: 0, length: 8192)
                    case .list: failing.entries(of: directory).map { _ in }
                    case .prefault:
                        io.mapShared(fd, length: 4096).flatMap { page in
                            defer { io.unmap(page, length: 4096) }
                            return failing.prefaultForWriting(page, offset: 0, length: 4096)
                        }
                    }
                #expect(throws: Errno.ioError) { try result.get() }
                // The real call did not happen: the file is intact, in place, and not renamed.
                #expect(try io.read(fd, count: 8, at: 0).get() == Array("data".utf8))
                #expect(FileManager.default.fileExists(atPath: path))
                #expect(!FileManager.default.fileExists(atPath: path + ".dir"))
                _ = io.lock(fd, exclusive: false)
            }
        }
    }

    @Test func anInjectedFaultSeesTheFullPathOfTheName() throws {
        try withTemporaryDirectory { url throws in
            try withDirectory(url) { directory throws in
                let seen = Locked<[String]>([])
                let recording = FileIO { _, path in
                    if let path { seen.withLock { $0.append(path) } }
                    return nil
                }
                let fd = try recording.open(in: directory, "file", flags: O_RDWR | O_CREAT).get()
                recording.close(fd)
                #expect(seen.withLock { $0 } == [url.path + "/file"])
            }
        }
    }

    @Test func aShortWriteWritesOnlyThePrefix() throws {
        try withTemporaryDirectory { url throws in
            try withDirectory(url) { directory throws in
                let fd = try io.open(in: directory, "file", flags: O_RDWR | O_CREAT).get()
                defer { io.close(fd) }
                let short = FileIO { call, _ in call == .write ? .shortWrite(bytes: 3, then: .noSpace) : nil }
                let result = [UInt8]("abcdefgh".utf8).withUnsafeBytes { short.write(fd, $0, at: 0) }
                #expect(throws: Errno.noSpace) { try result.get() }
                #expect(try io.read(fd, count: 100, at: 0).get() == Array("abc".utf8))
            }
        }
    }

    @Test func coordinationFilesShareTheirCountersAcrossOpenings() throws {
        try withTemporaryDirectory { url throws in
            let folder = try #require(try StoreFolder.open(parentPath: url.path, name: "store", io: io, create: true))
            let first = try CoordinationFile(in: folder, name: "store.lock")
            let second = try CoordinationFile(in: folder, name: "store.lock")
            #expect(!first.isInitialized)
            #expect(try permissions(url.appendingPathComponent("store/store.lock")) == 0o600)
            try first.lock()
            let sequence = first.publish(generation: 3, length: 1_234)
            first.unlock()
            #expect(second.isInitialized)
            #expect(second.sequence == sequence)
            #expect(second.published.generation == 3)
            #expect(second.published.length == 1_234)
            try second.lock()
            #expect(second.publish(generation: 4, length: 32) == sequence + 1)
            second.unlock()
            #expect(first.published.generation == 4)
            #expect(first.sequence == sequence + 1)
        }
    }
}
