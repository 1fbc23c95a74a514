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

/// A call that a signal interrupts (`EINTR`) is made again by `FileIO`, not returned as a
/// failure. The `EINTR` comes from the backend (``InterruptingFileSystem``), so it reaches the
/// shim's retry loop as a real one does; without that loop every call below fails.
@Suite struct InterruptInjectionTests {
    @Test func everyCallASignalCanInterruptIsMadeAgain() throws {
        try withTemporaryDirectory { directory throws in
            let interrupting = InterruptingFileSystem()
            let io = FileIO(fileSystem: interrupting)

            let folder = try io.openDirectory(atPath: directory.path).get()
            defer { io.close(folder.fd) }
            try io.makeDirectory(in: folder, "inner").get()
            try io.makeDirectories(atPath: directory.appendingPathComponent("a/b").path).get()
            let fd = try io.open(in: folder, "file", flags: O_RDWR | O_CREAT, mode: 0o600).get()
            defer { io.close(fd) }
            try [UInt8]("retried".utf8).withUnsafeBytes { try io.write(fd, $0, at: 0).get() }
            #expect(try io.read(fd, count: 7, at: 0).get() == Array("retried".utf8))
            #expect(try io.status(fd).get().size == 7)
            #expect(try io.status(in: folder, "file").get().size == 7)
            try io.sync(fd).get()
            try io.truncate(fd, to: 3).get()
            try io.allocate(fd, offset: 0, length: 16).get()
            try io.lock(fd, exclusive: true).get()
            try io.lock(fd, exclusive: false).get()
            try io.rename(in: folder, "file", to: "renamed").get()
            try io.renameWithoutReplacing(in: folder, "renamed", to: "file").get()
            try io.unlink(in: folder, "file").get()
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == ["a", "inner"])

            let retried: [FileIO.Call] = [
                .open, .makeDirectory, .write, .read, .stat, .sync, .truncate, .allocate, .lock, .rename, .unlink,
            ]
            for call in retried {
                #expect(interrupting.interruptions(of: call) > 0, "no \(call) was interrupted")
            }
        }
    }
}
