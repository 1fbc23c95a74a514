import Foundation
import Testing
import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue 14 with real processes: the store runs in another process (the test helper's app launch
/// and `write`), as root does in CI and as an unprivileged user (`nobody`) does, with links and
/// files planted at its names. Nothing outside the store folder is created or changed, and the
/// process is told `unsafeFile` with the path and what is there.
///
/// The in-process matrix (every name, every planted thing, every way of opening) is in
/// `TinyStorageTests/FileSafety/`.
@Suite struct FileSafetyTests {
    /// `parent/outside/` with an existing empty file, and `parent/stores/store` holding
    /// `streak = 364`, with the issue's two links in it: `store.lock` to a name that does not
    /// exist outside, and `store.tinystorage` to the empty file outside.
    func makeStoreWithTheIssuesLinks(in parent: URL) throws -> (stores: URL, folder: URL, outside: URL) {
        let outside = parent.appendingPathComponent("outside", isDirectory: true)
        let stores = parent.appendingPathComponent("stores", isDirectory: true)
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        try Data().write(to: outside.appendingPathComponent("empty"))
        let storage = openStore(stores)
        try storage.storeOrThrow(364, forKey: "streak")
        let folder = storage.directoryURL
        for (name, target) in [("store.lock", "not-yet"), ("store.tinystorage", "empty")] {
            let url = folder.appendingPathComponent(name)
            try FileManager.default.removeItem(at: url)
            try FileManager.default.createSymbolicLink(
                at: url, withDestinationURL: outside.appendingPathComponent(target))
        }
        return (stores, folder, outside)
    }

    /// The issue's reproduction, in a folder of mode 777 and in one of mode 1777: before issue 14
    /// a process run as root created `not-yet` and wrote 256 KiB into `empty`.
    @Test(arguments: [0o777, 0o1777] as [mode_t])
    func theIssuesPlantedLinksAreNotFollowedByAProcessRunAsThisUser(mode: mode_t) throws {
        try withTemporaryDirectory { parent throws in
            let (stores, folder, outside) = try makeStoreWithTheIssuesLinks(in: parent)
            try setPermissions(folder, mode)
            let before = try DirectorySnapshot(outside)

            let launch = try Helper.run(["launch-streak", stores.path, "store"])
            #expect(launch.status == 0, "\(launch.errors)")
            #expect(launch.output == NeverClobberTests.refusedLaunch("unsafeFile"), "\(launch.errors)")
            let problem =
                mode == 0o777
                ? "'\(folder.path)' can be written by other users (mode 777)"
                : "'\(folder.path)/store.lock' is a symbolic link"
            #expect(launch.errors.contains(problem), "\(launch.errors)")

            let write = try Helper.run(["write", stores.path, "store", "streak", "1"])
            #expect(write.status == 1, "\(write.errors)")
            #expect(write.errors.contains(problem), "\(write.errors)")

            #expect(try DirectorySnapshot(outside) == before)
            #expect(!FileManager.default.fileExists(atPath: outside.appendingPathComponent("not-yet").path))
            #expect(try fileSize(outside.appendingPathComponent("empty")) == 0)
        }
    }
}

/// The same with the store's user not root: `nobody` owns the store and runs the app, so the
/// checks are against that user, and files it could write to are what a link would reach.
@Suite(.enabled(if: Unprivileged.isSupported, "\(Unprivileged.unsupportedReason ?? "")"))
struct UnprivilegedFileSafetyTests {
    /// What is planted in `nobody`'s store folder.
    enum Planted: String, CaseIterable, Sendable {
        /// `store.tinystorage` replaced by a link to a file `nobody` may write.
        case dataFileLinkedToTheUsersOtherFile
        /// `store.tinystorage` replaced by a second name of that file.
        case dataFileHardLinkedToTheUsersOtherFile
        /// `store.lock` replaced by a link to a name that does not exist, in a folder `nobody` may
        /// write to.
        case lockFileLinkedToAMissingName
        /// `store.lock` replaced by root's file, which everyone may read and write.
        case lockFileOfAnotherUser

        var name: String {
            self == .lockFileLinkedToAMissingName || self == .lockFileOfAnotherUser ? "store.lock" : "store.tinystorage"
        }

        var problem: String {
            switch self {
            case .dataFileLinkedToTheUsersOtherFile, .lockFileLinkedToAMissingName: "is a symbolic link"
            case .dataFileHardLinkedToTheUsersOtherFile: "has 2 names (hard links)"
            case .lockFileOfAnotherUser: "is owned by user \(getuid()), not by this process's user"
            }
        }
    }

    /// `parent/store` holding `streak = 364` and `parent/outside/diary`, both `nobody`'s.
    func makeStoreOfNobody(in parent: URL) throws -> (folder: URL, outside: URL) {
        try setPermissions(parent, 0o755)
        let storage = openStore(parent)
        try storage.storeOrThrow(364, forKey: "streak")
        let outside = parent.appendingPathComponent("outside", isDirectory: true)
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: false)
        try Data("nobody's diary\n".utf8).write(to: outside.appendingPathComponent("diary"))
        try setPermissions(outside.appendingPathComponent("diary"), 0o600)
        try Unprivileged.handOver(storage.directoryURL)
        try Unprivileged.handOver(outside)
        return (storage.directoryURL, outside)
    }

    @Test(arguments: Planted.allCases, [0o700, 0o1777] as [mode_t])
    func whatIsPlantedInTheFolderOfAStoreRunAsNobodyIsRefused(planted: Planted, mode: mode_t) throws {
        try withTemporaryDirectory { parent throws in
            let (folder, outside) = try makeStoreOfNobody(in: parent)
            let url = folder.appendingPathComponent(planted.name)
            let diary = outside.appendingPathComponent("diary")
            try FileManager.default.removeItem(at: url)
            switch planted {
            case .dataFileLinkedToTheUsersOtherFile:
                try FileManager.default.createSymbolicLink(at: url, withDestinationURL: diary)
            case .dataFileHardLinkedToTheUsersOtherFile: #expect(link(diary.path, url.path) == 0)
            case .lockFileLinkedToAMissingName:
                try FileManager.default.createSymbolicLink(
                    at: url, withDestinationURL: outside.appendingPathComponent("not-yet"))
            case .lockFileOfAnotherUser:
                try Data(count: 4096).write(to: url)
                try setPermissions(url, 0o666)
            }
            try setPermissions(folder, mode)
            let before = try DirectorySnapshot(outside)

            let launch = try UnprivilegedHelperProcess.run(["launch-streak", parent.path, "store"])
            #expect(launch.status == 0, "\(launch.errors)")
            #expect(launch.output == NeverClobberTests.refusedLaunch("unsafeFile"), "\(launch.errors)")
            #expect(launch.errors.contains("'\(url.path)' \(planted.problem)"), "\(launch.errors)")
            #expect(try DirectorySnapshot(outside) == before)
        }
    }

    @Test func aStickyFolderEveryoneMayWriteToServesTheStoresUser() throws {
        try withTemporaryDirectory { parent throws in
            let (folder, _) = try makeStoreOfNobody(in: parent)
            try setPermissions(folder, 0o1777)

            let launch = try UnprivilegedHelperProcess.run(["launch-streak", parent.path, "store"])
            #expect(launch.status == 0, "\(launch.errors)")
            #expect(
                launch.output == [
                    "availability available", "retrieveOrThrow 364", "launch retrieved 364 attempted 365",
                    "storeOrThrow ok",
                ], "\(launch.errors)")
            try Unprivileged.handBack(folder)
            #expect(try openStore(parent).retrieveOrThrow(type: Int.self, forKey: "streak") == 365)
        }
    }
}
