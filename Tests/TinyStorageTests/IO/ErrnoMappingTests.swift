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

/// Each system error becomes the code a caller can act on.
@Suite struct ErrnoMappingTests {
    @Test(arguments: [
        (Errno.accessDenied, TinyStorageError.Code.permissionDenied),
        (.notPermitted, .permissionDenied),
        (.readOnlyFileSystem, .permissionDenied),
        (.noSpace, .noSpace),
        (.quotaExceeded, .noSpace),
        (.ioError, .io),
        (.notFound, .io),
        (.notDirectory, .io),
        (.isDirectory, .io),
        (Errno(EMFILE), .io),
    ])
    func systemErrorsMapToCodes(errno: Errno, code: TinyStorageError.Code) {
        let error = TinyStorageError.system(errno, "write to", path: "/some/store.tinystorage", key: "k")
        #expect(error.code == code)
        #expect(error.underlying as? Errno == errno)
        #expect(error.key == "k")
        #expect(error.message.contains("/some/store.tinystorage"))
        #expect(error.description.hasPrefix("TinyStorageError.\(code.rawValue): "))
    }

    @Test func errnoDescriptionsNameTheError() {
        #expect(Errno.noSpace.description.contains("\(ENOSPC)"))
        #expect(Errno(ENOENT).description.lowercased().contains("no such file"))
    }
}
