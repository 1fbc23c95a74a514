import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The floor for any file-backed store: `pwrite(2)` of a 40-byte record after the previous one,
/// optionally followed by `fdatasync(2)`.
final class RawAppendFile {
    /// Where the records go.
    enum Space {
        /// At the end of the file, which grows with each record (as a `.standard` commit appends).
        case growing
        /// Into `bytes` of zeros written and synced first, so later syncs flush data blocks only,
        /// not the file's size (as a `.immediate` commit's preallocation does).
        case zeroFilled(bytes: Int)
        /// Into `bytes` reserved with `posix_fallocate(3)` (Linux), nothing written.
        case allocated(bytes: Int)
    }

    /// A 40-byte record, what one small commit (a key, an Int, the record's framing) writes.
    static let record = [UInt8]("put key-000042 = 1234567 crc=0xabcd1234\n".utf8)
    /// A growing file starts again from empty past this size, so it never grows without bound.
    static let growingLimit = 1 << 20

    let fd: Int32
    private let record = RawAppendFile.record
    private let isGrowing: Bool
    private let limit: Int
    private var end = 0

    /// Opens a new, empty file and prepares `space`.
    init(path: String, space: Space) throws {
        fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        switch space {
        case .growing:
            (isGrowing, limit) = (true, Self.growingLimit)
        case .zeroFilled(let bytes):
            (isGrowing, limit) = (false, bytes)
            let zeros = [UInt8](repeating: 0, count: bytes)
            guard zeros.withUnsafeBytes({ pwrite(fd, $0.baseAddress, $0.count, 0) }) == bytes, fsync(fd) == 0 else {
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
        case .allocated(let bytes):
            (isGrowing, limit) = (false, bytes)
            #if os(Linux)
            let result = posix_fallocate(fd, 0, off_t(bytes))
            guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EIO) }
            #else
            throw POSIXError(.ENOTSUP)
            #endif
        }
    }

    deinit { close(fd) }

    /// Writes one record after the previous one (`pwrite(2)`), from offset 0 again at the limit
    /// (a growing file is first truncated to empty: one `ftruncate(2)` per 26,000 records).
    @inline(__always)
    func append() {
        if end + record.count > limit {
            if isGrowing { precondition(ftruncate(fd, 0) == 0, "ftruncate failed: \(errno)") }
            end = 0
        }
        let written = record.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(end)) }
        precondition(written == record.count, "pwrite failed: \(errno)")
        end += record.count
    }

    /// `fdatasync(2)` (`F_FULLFSYNC` would be the Apple equivalent; this is the Linux baseline).
    @inline(__always)
    func sync() {
        #if canImport(Darwin)
        precondition(fcntl(fd, F_FULLFSYNC) == 0, "F_FULLFSYNC failed: \(errno)")
        #else
        precondition(fdatasync(fd) == 0, "fdatasync failed: \(errno)")
        #endif
    }
}
