#if os(Linux)
import Foundation
import Testing

@testable import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Whether a file in the temporary directory can hold a class other than none.
private let temporaryFilesKeepClasses: Bool = {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("TinyStorageTests-\(UUID())")
    guard FileManager.default.createFile(atPath: url.path, contents: nil) else { return false }
    defer { try? FileManager.default.removeItem(at: url) }
    let protection = SimulatedDataProtection()
    return (try? protection.setProtectionClass(.complete, ofItemAt: url.path).get()) != nil
        && (try? protection.protectionClass(ofItemAt: url.path).get()) == .complete
}()

/// Issue 28, defect 8: on iOS a file keeps the protection class it was created with, and one of any
/// class but `none` cannot be opened before the first unlock after a restart, when apps and
/// widgets are launched. A store's folder and every file it uses must have none, whoever gave them
/// a class (an older version, the app, a copy), and a store whose files are still protected while
/// the device is locked is unavailable, never empty.
///
/// Through `SimulatedDataProtection`, the stand-in `SystemFileSystem` uses with Apple semantics on
/// Linux: classes in an extended attribute, and a locked device of each test's own.
@Suite(
    .enabled(
        if: Platform.current.removesDataProtection,
        "Linux semantics keep no data protection: the pass built with TINYSTORAGE_APPLE_SEMANTICS runs these"),
    .enabled(
        if: temporaryFilesKeepClasses,
        "the temporary directory has no user extended attributes, where the stand-in keeps protection classes")
)
struct ProtectedFilesTests {
    /// A simulated device, and the file layer of an app running on it.
    struct Device {
        let device = SimulatedDevice()
        var protection: SimulatedDataProtection { SimulatedDataProtection(device: device) }
        var io: FileIO { FileIO(fileSystem: SystemFileSystem(simulatedProtection: protection)) }

        func setClass(_ protection: ProtectionClass, of url: URL) throws {
            try self.protection.setProtectionClass(protection, ofItemAt: url.path).get()
        }

        func protectionClass(of url: URL) throws -> ProtectionClass {
            try protection.protectionClass(ofItemAt: url.path).get()
        }
    }

    /// The stand-in itself, so the tests above rest on Apple's rules: classes are inherited, and
    /// a locked device refuses protected files, not directories nor unprotected files.
    @Test func theStandInFollowsApplesRules() throws {
        try withTemporaryDirectory { directory throws in
            let device = Device()
            let io = device.io
            let protected = directory.appendingPathComponent("protected")
            try io.makeDirectories(atPath: protected.path).get()
            try device.setClass(.complete, of: protected)
            let folder = try io.openDirectory(atPath: protected.path).get()
            defer { io.close(folder.fd) }
            let created = try io.open(in: folder, "file", flags: O_RDWR | O_CREAT | O_EXCL).get()
            io.close(created)
            #expect(try device.protectionClass(of: protected.appendingPathComponent("file")) == .complete)
            try io.makeDirectory(in: folder, "unprotected").get()
            #expect(try device.protectionClass(of: protected.appendingPathComponent("unprotected")) == .none)

            device.device.lock()
            #expect(throws: Errno.notPermitted) { try io.open(in: folder, "file", flags: O_RDONLY).get() }
            #expect(throws: Errno.notPermitted) { try io.open(in: folder, "new", flags: O_RDWR | O_CREAT).get() }
            #expect(throws: Errno.notPermitted) { try io.removeDataProtection(ofItemAt: folder.path(of: "file")).get() }
            let inner = try io.open(in: folder, "unprotected", flags: O_RDONLY | O_DIRECTORY).get()
            io.close(inner)
            try io.removeDataProtection(ofItemAt: folder.path).get()
            let unprotected = try io.open(in: folder, "new", flags: O_RDWR | O_CREAT | O_EXCL).get()
            io.close(unprotected)

            device.device.unlock()
            let reopened = try io.open(in: folder, "file", flags: O_RDONLY).get()
            io.close(reopened)
        }
    }
}
#endif
