import Foundation
import Testing

@testable import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An open reads a data file only as far as it may hold something but zeros (`FileIO.endOfData`):
/// the space allocated ahead of the log, never written, is a hole to the file system, so an open
/// no longer reads up to 1 MiB of zeros. What lies past the log inside that space is still found.
@Suite struct EndOfDataTests {
    /// Whether the temporary directory's file system reports holes (ext4, XFS, APFS do).
    static let reportsHoles: Bool = {
        let path = NSTemporaryDirectory() + "holes-\(UUID().uuidString)"
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0o600)
        defer {
            close(fd)
            unlink(path)
        }
        guard fd >= 0, ftruncate(fd, 1 << 20) == 0 else { return false }
        return SystemFileSystem().seek(fd, from: 0, hole: false) == .failure(Errno(ENXIO))
    }()

    @Test(.enabled(if: reportsHoles, "the temporary directory's file system reports no holes"))
    func dataEndsWhereWhatWasWrittenEndsNotWhereTheAllocationEnds() throws {
        try withTemporaryDirectory { directory throws in
            let io = FileIO()
            let path = directory.appendingPathComponent("file").path
            let fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0o600)
            try #require(fd >= 0)
            defer { close(fd) }
            let page = [UInt8](repeating: 7, count: 4096)
            try page.withUnsafeBytes { try io.write(fd, $0, at: 0).get() }
            try io.allocate(fd, offset: 0, length: 1 << 20).get()
            #expect(io.endOfData(fd, size: 1 << 20) == 4096)
            // A byte written deep in the allocated space (a dead process's append, say) is data.
            try [UInt8(1)].withUnsafeBytes { try io.write(fd, $0, at: 600_000).get() }
            let end = io.endOfData(fd, size: 1 << 20)
            #expect(end > 600_000 && end <= 1 << 20)
        }
    }

    /// A file system that cannot say where its holes are.
    final class NoSeekFileSystem: ForwardingFileSystem, Sendable {
        let base: any FileSystem = SystemFileSystem()
        func seek(_ fd: Int32, from offset: Int, hole: Bool) -> Result<Int, Errno> { .failure(Errno(EINVAL)) }
    }

    /// A file system that cannot tell (`EINVAL`: some network file systems) is read whole.
    @Test func whereHolesCannotBeToldTheWholeFileIsRead() throws {
        try withTemporaryDirectory { directory throws in
            let io = FileIO(fileSystem: NoSeekFileSystem())
            let path = directory.appendingPathComponent("file").path
            let fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0o600)
            try #require(fd >= 0)
            defer { close(fd) }
            try #require(ftruncate(fd, 100_000) == 0)
            #expect(io.endOfData(fd, size: 100_000) == 100_000)
        }
    }

    /// Bytes left deep inside the space allocated ahead of a log (Linux's mapped appends) are
    /// found by the next open, set aside and reported, as when the whole file was read.
    @Test(.enabled(if: isLinux && reportsHoles, "appends through a mapping allocate space ahead on Linux"))
    func bytesDeepInTheSpaceAllocatedAheadAreFoundByAnOpen() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            for index in 0..<10 { try storage.storeOrThrow(index, forKey: "k\(index)") }
            try storage.synchronize()
            let size = try #require(
                try FileManager.default.attributesOfItem(atPath: storage.fileURL.path)[.size] as? Int)
            try #require(size >= 60_000, "allocated ahead: \(size) bytes")
            let handle = try FileHandle(forWritingTo: storage.fileURL)
            try handle.seek(toOffset: UInt64(size - 5_000))
            try handle.write(contentsOf: Data([9, 8, 7, 6, 5]))
            try handle.close()

            let reopened = openStore(directory)
            #expect(reopened.integer(forKey: "k9") == 9)
            let report = try #require(reopened.recoveryReports.first)
            #expect(report.isInterruptedWrite)
            #expect(report.damagedRanges.last?.upperBound == size - 4_995)
        }
    }
}
