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

    /// No change watch: these tests decide when the store looks at its files.
    let options = Engine.Options(watchesChanges: false)

    /// Creates the store `store` in `directory` with `values`, and closes it.
    func makeStore(in directory: URL, _ values: [String: Int], on device: Device) throws {
        let storage = openStore(directory, durability: .immediate, io: device.io, options: options)
        for (key, value) in values { try storage.storeOrThrow(value, forKey: key) }
    }

    /// The folder, lock file and data file of the store `store` in `directory`.
    func storeItems(in directory: URL) -> [URL] {
        let folder = directory.appendingPathComponent("store")
        return [
            folder, folder.appendingPathComponent("store.lock"), folder.appendingPathComponent("store.tinystorage"),
        ]
    }

    func dataProtectionWarnings(_ logger: TestLogger) -> [String] {
        logger.texts(atLeast: .warning).filter { $0.contains("data protection") }
    }

    @Test func aStoreWhoseFilesHaveAClassOpensWithEveryFileUnprotected() throws {
        try withTemporaryDirectory { directory throws in
            let device = Device()
            try makeStore(in: directory, ["streak": 364, "best": 1000], on: device)
            let items = storeItems(in: directory)
            for item in items { try device.setClass(.completeUntilFirstUserAuthentication, of: item) }

            let logger = TestLogger()
            let storage = openStore(directory, io: device.io, logger: logger, options: options)
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "best") == 1000)

            for item in items { #expect(try device.protectionClass(of: item) == .none, "\(item.path)") }
            let warnings = dataProtectionWarnings(logger)
            #expect(warnings.count == 1, "\(warnings)")
            for item in items {
                #expect(
                    warnings.first?.contains("'\(item.path)' (was completeUntilFirstUserAuthentication)") == true,
                    "\(item.path) is not named in \(warnings)")
            }
        }
    }

    @Test func aProtectedStoreIsUnavailableWhileTheDeviceIsLockedAndWholeOnceUnlocked() throws {
        try withTemporaryDirectory { directory throws in
            let device = Device()
            let values = ["streak": 364, "best": 1000]
            try makeStore(in: directory, values, on: device)
            let items = storeItems(in: directory)
            for item in items { try device.setClass(.completeUntilFirstUserAuthentication, of: item) }
            let dataFile = items[2]
            let bytes = try Data(contentsOf: dataFile)

            device.device.lock()
            let storage = openStore(directory, io: device.io, options: options)
            let error = unavailabilityError(storage)
            #expect(
                error?.code == .permissionDenied && error?.message.contains("data protection") == true,
                "\(String(describing: error))")
            expectError(.unavailable) { try storage.retrieveOrThrow(type: Int.self, forKey: "streak") }
            #expect(storage.retrieve(type: Int.self, forKey: "streak") == nil, "a value from an unread store")
            expectError(.unavailable) { try storage.rawJSON() }
            expectError(.unavailable) { try storage.storeOrThrow(1, forKey: "whileLocked") }
            #expect(try Data(contentsOf: dataFile) == bytes, "the data file changed while the store was unavailable")
            for item in items.dropFirst() {
                #expect(try device.protectionClass(of: item) == .completeUntilFirstUserAuthentication, "\(item.path)")
            }

            device.device.unlock()
            for (key, value) in values { #expect(try storage.retrieveOrThrow(type: Int.self, forKey: key) == value) }
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "whileLocked") == nil)
            #expect(storage.availability.isAvailable)
            for item in items { #expect(try device.protectionClass(of: item) == .none, "\(item.path)") }
        }
    }

    @Test func aStoreCreatedWhileLockedInAProtectedContainerIsReadableAndUnprotected() throws {
        try withTemporaryDirectory { directory throws in
            let device = Device()
            // An app's container: what the app creates in it is protected until first unlock.
            let container = directory.appendingPathComponent("container")
            try FileManager.default.createDirectory(at: container, withIntermediateDirectories: false)
            try device.setClass(.completeUntilFirstUserAuthentication, of: container)
            let parent = container.appendingPathComponent("Library/Application Support")

            device.device.lock()
            let logger = TestLogger()
            let storage = openStore(parent, durability: .immediate, io: device.io, logger: logger, options: options)
            try storage.storeOrThrow(364, forKey: "streak")
            try storage.storeOrThrow(String(repeating: "x", count: 100), forKey: "note")
            try storage.compactNow()
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
            let another = openStore(parent, io: device.io, options: options)
            #expect(try another.retrieveOrThrow(type: Int.self, forKey: "streak") == 364)

            let folder = parent.appendingPathComponent("store")
            let created = [folder] + allPaths(below: folder).map { folder.appendingPathComponent($0) }
            #expect(created.count >= 3, "\(created)")
            for item in created { #expect(try device.protectionClass(of: item) == .none, "\(item.path)") }
            // NB: the folders made on the way are the app's, and may hold its other files.
            #expect(try device.protectionClass(of: parent) == .completeUntilFirstUserAuthentication)
            #expect(dataProtectionWarnings(logger).isEmpty)
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
