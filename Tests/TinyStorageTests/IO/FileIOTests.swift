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

/// The syscall shims: positional reads and writes, directories, and injected faults.
@Suite struct FileIOTests {
    let io = FileIO.system

    @Test func writesAndReadsAtOffsets() throws {
        try withTemporaryDirectory { directory throws in
            let path = directory.appendingPathComponent("file").path
            let fd = try io.open(path, flags: O_RDWR | O_CREAT, mode: 0o600).get()
            defer { io.close(fd) }
            try [UInt8]("hello world".utf8).withUnsafeBytes { try io.write(fd, $0, at: 0).get() }
            try [UInt8]("WORLD".utf8).withUnsafeBytes { try io.write(fd, $0, at: 6).get() }
            #expect(try io.read(fd, count: 11, at: 0).get() == Array("hello WORLD".utf8))
            #expect(try io.read(fd, count: 100, at: 6).get() == Array("WORLD".utf8), "short only at end of file")
            #expect(try io.read(fd, count: 10, at: 50).get().isEmpty)
            #expect(try io.status(fd).get().size == 11)
            #expect(try io.status(fd).get().isRegularFile)
            try io.truncate(fd, to: 5).get()
            #expect(try io.status(atPath: path).get().size == 5)
            try io.sync(fd).get()
            try io.sync(fd, dataOnly: true).get()
            try io.syncDirectory(directory.path).get()
        }
    }

    @Test func openingAMissingFileFailsWithNotFound() throws {
        try withTemporaryDirectory { directory throws in
            let result = io.open(directory.appendingPathComponent("missing").path, flags: O_RDONLY)
            #expect(throws: Errno.notFound) { try result.get() }
        }
    }

    @Test func makeDirectoryAcceptsAnExistingDirectoryButNotAFile() throws {
        try withTemporaryDirectory { directory throws in
            let path = directory.appendingPathComponent("sub").path
            try io.makeDirectory(path, mode: 0o700).get()
            try io.makeDirectory(path, mode: 0o700).get()
            #expect(try permissions(URL(fileURLWithPath: path)) == 0o700)
            let file = directory.appendingPathComponent("file")
            try Data().write(to: file)
            #expect(throws: Errno.notDirectory) { try io.makeDirectory(file.path).get() }
        }
    }

    @Test func unlinkIgnoresMissingFilesAndRenameReplaces() throws {
        try withTemporaryDirectory { directory throws in
            let a = directory.appendingPathComponent("a")
            let b = directory.appendingPathComponent("b")
            try io.unlink(a.path).get()
            try Data("A".utf8).write(to: a)
            try Data("B".utf8).write(to: b)
            try io.rename(a.path, to: b.path).get()
            #expect(try Data(contentsOf: b) == Data("A".utf8))
            #expect(!FileManager.default.fileExists(atPath: a.path))
            try io.unlink(b.path).get()
            #expect(!FileManager.default.fileExists(atPath: b.path))
        }
    }

    @Test(arguments: FileIO.Call.allCases)
    func anInjectedFailureIsReturnedWithoutMakingTheCall(call: FileIO.Call) throws {
        try withTemporaryDirectory { directory throws in
            let path = directory.appendingPathComponent("file").path
            let fd = try io.open(path, flags: O_RDWR | O_CREAT).get()
            defer { io.close(fd) }
            try [UInt8]("data".utf8).withUnsafeBytes { try io.write(fd, $0, at: 0).get() }
            let failing = FileIO { candidate, _ in candidate == call ? .fail(.ioError) : nil }
            let result: Result<Void, Errno> =
                switch call {
                case .open: failing.open(path, flags: O_RDONLY).map { failing.close($0) }.map { _ in }
                case .close: failing.close(-1)
                case .read: failing.read(fd, count: 4, at: 0).map { _ in }
                case .write: [UInt8]("XXXX".utf8).withUnsafeBytes { failing.write(fd, $0, at: 0) }
                case .sync: failing.sync(fd)
                case .lock: failing.lock(fd, exclusive: true)
                case .stat: failing.status(fd).map { _ in }
                case .rename: failing.rename(path, to: path + ".renamed")
                case .makeDirectory: failing.makeDirectory(path + ".dir")
                case .truncate: failing.truncate(fd, to: 0)
                case .unlink: failing.unlink(path)
                case .map: failing.mapShared(fd, length: 4096).map { munmap($0, 4096) }.map { _ in }
                }
            #expect(throws: Errno.ioError) { try result.get() }
            // The real call did not happen: the file is intact, in place, and not renamed.
            #expect(try io.read(fd, count: 4, at: 0).get() == Array("data".utf8))
            #expect(FileManager.default.fileExists(atPath: path))
            #expect(!FileManager.default.fileExists(atPath: path + ".dir"))
            _ = io.lock(fd, exclusive: nil)
        }
    }

    @Test func aShortWriteWritesOnlyThePrefix() throws {
        try withTemporaryDirectory { directory throws in
            let path = directory.appendingPathComponent("file").path
            let fd = try io.open(path, flags: O_RDWR | O_CREAT).get()
            defer { io.close(fd) }
            let short = FileIO { call, _ in call == .write ? .shortWrite(bytes: 3, then: .noSpace) : nil }
            let result = [UInt8]("abcdefgh".utf8).withUnsafeBytes { short.write(fd, $0, at: 0) }
            #expect(throws: Errno.noSpace) { try result.get() }
            #expect(try io.read(fd, count: 100, at: 0).get() == Array("abc".utf8))
        }
    }

    @Test func coordinationFilesShareTheirCountersAcrossOpenings() throws {
        try withTemporaryDirectory { directory throws in
            let path = directory.appendingPathComponent("store.lock").path
            let first = try CoordinationFile(path: path, io: io)
            let second = try CoordinationFile(path: path, io: io)
            #expect(!first.isInitialized)
            #expect(try permissions(URL(fileURLWithPath: path)) == 0o600)
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
