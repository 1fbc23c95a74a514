import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The floor for any file-backed store: `pwrite(2)` of a ~30-byte record at the end of a file,
/// optionally followed by `fdatasync(2)`.
final class RawAppendFile {
    let fd: Int32
    private(set) var end: Int = 0
    /// A 30-byte record, roughly what one small commit costs on disk.
    private let record = [UInt8]("put counter=1234567 crc=abcd\n ".utf8)

    /// Opens a new, empty file. With `preallocate`, first writes and syncs `bytes` of zeros so
    /// later syncs flush data blocks only, not the file's size.
    init(path: String, preallocate bytes: Int = 0) throws {
        fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        if bytes > 0 {
            let zeros = [UInt8](repeating: 0, count: bytes)
            guard zeros.withUnsafeBytes({ pwrite(fd, $0.baseAddress, $0.count, 0) }) == bytes, fsync(fd) == 0 else {
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
        }
    }

    deinit { close(fd) }

    /// Writes one record after the previous one (`pwrite(2)`); wraps around to offset 0 after
    /// `limit` bytes so a preallocated file never grows.
    @inline(__always)
    func append(limit: Int = .max) {
        if end + record.count > limit { end = 0 }
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
