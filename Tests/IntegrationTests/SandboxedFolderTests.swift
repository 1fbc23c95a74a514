import Foundation
import Testing

/// Issue 28, D1, with real permissions: an iOS app's container sits below folders its sandbox lets
/// it pass through but not open or list (`/private/var/mobile/Containers/Data/Application`), and
/// its Application Support folder does not exist until someone makes it. A store is created
/// there, by a process of the user `nobody`, with both platform semantics: no folder above the
/// ones the store makes is ever opened for reading.
@Suite(.enabled(if: Unprivileged.isSupported, "\(Unprivileged.unsupportedReason ?? "")"))
struct SandboxedFolderTests {
    /// `root/containers` (root's, mode 0711: others pass through, cannot list), then the app's
    /// own home inside it (`nobody`'s); the store goes in `Library/Application Support`, which
    /// does not exist yet.
    @Test func aStoreIsCreatedBelowFoldersItMayPassThroughButNotRead() throws {
        try withTemporaryDirectory { root throws in
            let containers = root.appendingPathComponent("containers")
            try FileManager.default.createDirectory(
                at: containers, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o711])
            let home = containers.appendingPathComponent("app")
            try FileManager.default.createDirectory(
                at: home, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            try Unprivileged.handOver(home)
            let support = home.appendingPathComponent("Library/Application Support").path

            let write = try UnprivilegedHelperProcess.run(["write", support, "settings", "streak", "364"])
            #expect(write.status == 0, "\(write.errors)")
            let dump = try UnprivilegedHelperProcess.run(["dump", support, "settings"])
            #expect(dump.output == ["{\"key\":\"streak\",\"value\":364}"], "\(dump.errors)")
        }
    }

    /// A folder the process may add to but not read (mode 0733, a drop box): the new store folder's
    /// name cannot be flushed into it (that needs a descriptor open for reading), which is not an
    /// error, whether the refusal says `EACCES` or, as the iOS sandbox does, `EPERM`.
    @Test func aStoreIsCreatedInAFolderItMayAddToButNotRead() throws {
        try withTemporaryDirectory { root throws in
            let dropBox = root.appendingPathComponent("drop-box")
            try FileManager.default.createDirectory(
                at: dropBox, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o733])
            let write = try UnprivilegedHelperProcess.run(["write", dropBox.path, "settings", "streak", "364"])
            #expect(write.status == 0, "\(write.errors)")
            let dump = try UnprivilegedHelperProcess.run(["dump", dropBox.path, "settings"])
            #expect(dump.output == ["{\"key\":\"streak\",\"value\":364}"], "\(dump.errors)")
        }
    }
}
