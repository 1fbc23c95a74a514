import Foundation
import Testing
import TinyStorage

/// Issue 4's acceptance scenario, for real: a store holds `streak = 364`; the app launches as a
/// user who cannot read the store's file and runs `let s = retrieve(...) ?? 0; store(s + 1, ...)`.
/// The file must still say 364 afterwards — never 1 — even when the store's directory is
/// world-writable, so nothing but the library stands between the app and the file.
///
/// The app is the test helper's `launch-streak` command, run as `nobody` through `setpriv(1)`: the
/// tests run as root, and root reads every file. (The same scenario through fault injection, for
/// machines where this suite is skipped, is in `Reliability/LaunchScenarioTests.swift`.)
@Suite(.enabled(if: Unprivileged.isSupported, "\(Unprivileged.unsupportedReason ?? "")"))
struct NeverClobberTests {
    /// How the lock file beside the data file is left for the unprivileged launch.
    enum LockFile: String, CaseIterable, Sendable {
        /// 0600 root, as the store creates it: the launch fails at the lock file.
        case ownerOnly
        /// 0666: the launch gets the lock and fails at the data file itself.
        case shared
        /// Absent: the launch creates its own lock file in the writable directory, then fails at
        /// the data file.
        case missing
    }

    /// The launch's report while the store cannot be read: unavailable, why, and a refused write.
    static let refusedLaunch = [
        "availability unavailable permissionDenied",
        "retrieveOrThrow threw unavailable/permissionDenied",
        "launch retrieved nil attempted 1",
        "storeOrThrow threw unavailable/permissionDenied",
    ]

    /// Creates `parent/store` holding `streak = 364` as root, with its directory 0777.
    func makeStreakStore(in parent: URL) throws -> (directory: URL, dataFile: URL, lockFile: URL) {
        try setPermissions(parent, 0o755)
        let storage = openStore(parent)
        try storage.storeOrThrow(364, forKey: "streak")
        let directory = storage.directoryURL
        try setPermissions(directory, 0o777)
        return (directory, storage.fileURL, directory.appendingPathComponent("store.lock"))
    }

    @Test(arguments: LockFile.allCases)
    func aLaunchThatCannotReadTheStoreLeavesTheStreakAt364(lockFile: LockFile) throws {
        try withTemporaryDirectory { parent throws in
            let store = try makeStreakStore(in: parent)
            switch lockFile {
            case .ownerOnly: break
            case .shared: try setPermissions(store.lockFile, 0o666)
            case .missing: try FileManager.default.removeItem(at: store.lockFile)
            }
            let bytes = try Data(contentsOf: store.dataFile)
            let before = try DirectorySnapshot(store.directory)

            let launch = try UnprivilegedHelperProcess.run(["launch-streak", parent.path, "store"])
            #expect(launch.status == 0, "\(launch.errors)")
            // G1: the launch was told the store is unavailable and why; it never saw a made-up 0.
            #expect(launch.output == Self.refusedLaunch, "\(launch.errors)")
            // G2: the refused write touched nothing: same bytes, same files, same owners.
            #expect(try Data(contentsOf: store.dataFile) == bytes)
            var after = try DirectorySnapshot(store.directory)
            if lockFile == .missing {
                // The only trace of the launch may be its own, empty lock file.
                let created = after.entries.removeValue(forKey: "store.lock")
                #expect(created == nil || created?.contents?.allSatisfy { $0 == 0 } == true)
            }
            #expect(after == before, "before: \(before)\nafter: \(after)")
            #expect(try openStore(parent).retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
        }
    }

    @Test func aWaitingLaunchRecoversByItselfOnceTheFileIsReadableAgain() throws {
        try withTemporaryDirectory { parent throws in
            let store = try makeStreakStore(in: parent)
            try setPermissions(store.lockFile, 0o666)
            try setPermissions(store.dataFile, 0o000)
            let bytes = try Data(contentsOf: store.dataFile)

            let launch = try UnprivilegedHelperProcess(["launch-streak", parent.path, "store", "--wait"])
            let refused = launch.readLines(through: "waiting")
            #expect(refused == Self.refusedLaunch, "\(launch.errorOutput)")
            #expect(try Data(contentsOf: store.dataFile) == bytes)

            // The launch is now waiting in `waitUntilAvailable`, with the same instance: no reopen.
            try setPermissions(store.dataFile, 0o666)
            let (status, output) = launch.finish()
            #expect(status == 0, "\(launch.errorOutput)")
            #expect(
                output == [
                    "available",
                    "availability available",
                    "retrieveOrThrow 364",
                    "launch retrieved 364 attempted 365",
                    "storeOrThrow ok",
                ], "\(launch.errorOutput)")

            // The streak went on from 364, and the earlier bytes are still the start of the log.
            #expect(try openStore(parent).retrieveOrThrow(type: Int.self, forKey: "streak") == 365)
            let now = try Data(contentsOf: store.dataFile)
            #expect(now.prefix(bytes.count) == bytes)
        }
    }

    @Test func aLaunchThatCannotReadTheOriginalTinyStorageFileCreatesNoStore() throws {
        try withTemporaryDirectory { parent throws in
            try setPermissions(parent, 0o755)
            let directory = parent.appendingPathComponent("store", isDirectory: true)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
            try setPermissions(directory, 0o777)
            let original = directory.appendingPathComponent("tiny-storage.plist")
            let plist = try PropertyListSerialization.data(
                fromPropertyList: ["streak": Data("364".utf8)], format: .binary, options: 0)
            try plist.write(to: original)
            try setPermissions(original, 0o600)

            let launch = try UnprivilegedHelperProcess.run(["launch-streak", parent.path, "store"])
            #expect(launch.status == 0, "\(launch.errors)")
            #expect(launch.output == Self.refusedLaunch, "\(launch.errors)")
            // No data file of ours may shadow the original's values with an empty store.
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("store.tinystorage").path))
            #expect(try Data(contentsOf: original) == plist)
            #expect(try openStore(parent).retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
        }
    }
}
