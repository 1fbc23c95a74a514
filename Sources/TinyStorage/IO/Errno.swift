#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A POSIX error number, as returned by the shims in ``FileIO``.
struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    var rawValue: Int32

    init(_ rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's current `errno`.
    static var current: Errno { Errno(errno) }

    static let interrupted = Errno(EINTR)
    static let notFound = Errno(ENOENT)
    static let exists = Errno(EEXIST)
    static let accessDenied = Errno(EACCES)
    static let notPermitted = Errno(EPERM)
    static let ioError = Errno(EIO)
    static let noSpace = Errno(ENOSPC)
    static let quotaExceeded = Errno(EDQUOT)
    static let readOnlyFileSystem = Errno(EROFS)
    static let isDirectory = Errno(EISDIR)
    static let notDirectory = Errno(ENOTDIR)
    static let wouldBlock = Errno(EWOULDBLOCK)
    /// `ELOOP`: what `O_NOFOLLOW` answers when the last component is a symbolic link.
    static let symbolicLinkLoop = Errno(ELOOP)
    static let noSuchDeviceOrAddress = Errno(ENXIO)
    static let notSupported = Errno(ENOTSUP)

    var description: String {
        guard let text = strerror(rawValue) else { return "errno \(rawValue)" }
        return "\(String(cString: text)) (errno \(rawValue))"
    }
}
