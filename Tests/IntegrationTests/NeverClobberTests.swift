import Foundation
import Testing
import TinyStorage

/// Issue 4's acceptance scenario, for real: a store holds `streak = 364`; the app launches while
/// it cannot read the store's file and runs `let s = retrieve(...) ?? 0; store(s + 1, ...)`. The
/// file must still say 364 afterwards — never 1.
///
/// The app is the test helper's `launch-streak` command, run as `nobody` through `setpriv(1)` (the
/// tests run as root, and root reads every file), and the store belongs to `nobody`, as an app's
/// store belongs to the app's user: TinyStorage refuses store folders another user owns or can
/// write to, which one test here shows too. (The same scenario through fault injection, for
/// machines where this suite is skipped, is in `Reliability/LaunchScenarioTests.swift`.)
@Suite(.enabled(if: Unprivileged.isSupported, "\(Unprivileged.unsupportedReason ?? "")"))
struct NeverClobberTests {
    /// What is unreadable for the unprivileged launch.
    enum Unreadable: String, CaseIterable, Sendable {
        /// The data file (mode 000): the launch gets the lock and fails at the data file.
        case dataFile
        /// The lock file and the data file: the launch fails at the lock file.
        case lockAndDataFiles
        /// The data file, and the lock file is missing: the launch creates its own lock file,
        /// then fails at the data file.
        case dataFileWithoutLockFile
    }

    /// The launch's report while the store cannot be read: unavailable, why, and a refused write.
    static func refusedLaunch(_ reason: String = "permissionDenied") -> [String] {
        [
            "availability unavailable \(reason)",
            "retrieveOrThrow threw unavailable/\(reason)",
            "launch retrieved nil attempted 1",
            "storeOrThrow threw unavailable/\(reason)",
        ]
    }

    /// Creates `parent/store` holding `streak = 364`, and hands its folder and files to `nobody`.
    ///
    /// NB: synchronized first. The commit's background flush writes the durable mark into the
    /// data file's header up to a second later, released store or not; once `synchronize()` has
    /// written and flushed that mark, the flush finds it written and writes nothing. So the bytes
    /// a test takes next are final, however slowly the test runs (ThreadSanitizer's lane).
    func makeStreakStore(in parent: URL) throws -> (directory: URL, dataFile: URL, lockFile: URL) {
        try setPermissions(parent, 0o755)
        let storage = openStore(parent)
        try storage.storeOrThrow(364, forKey: "streak")
        try storage.synchronize()
        let directory = storage.directoryURL
        try Unprivileged.handOver(directory)
        return (directory, storage.fileURL, directory.appendingPathComponent("store.lock"))
    }

    /// Reads the streak as root, after giving the store back to root.
    func streakReadByRoot(in parent: URL) throws -> Int? {
        try Unprivileged.handBack(parent.appendingPathComponent("store"))
        return try openStore(parent).retrieveOrThrow(type: Int.self, forKey: "streak")
    }

    @Test(arguments: Unreadable.allCases)
    func aLaunchThatCannotReadTheStoreLeavesTheStreakAt364(unreadable: Unreadable) throws {
        try withTemporaryDirectory { parent throws in
            let store = try makeStreakStore(in: parent)
            try setPermissions(store.dataFile, 0o000)
            switch unreadable {
            case .dataFile: break
            case .lockAndDataFiles: try setPermissions(store.lockFile, 0o000)
            case .dataFileWithoutLockFile: try FileManager.default.removeItem(at: store.lockFile)
            }
            let bytes = try Data(contentsOf: store.dataFile)
            let before = try DirectorySnapshot(store.directory)

            let launch = try UnprivilegedHelperProcess.run(["launch-streak", parent.path, "store"])
            #expect(launch.status == 0, "\(launch.errors)")
            // G1: the launch was told the store is unavailable and why; it never saw a made-up 0.
            #expect(launch.output == Self.refusedLaunch(), "\(launch.errors)")
            // G2: the refused write touched nothing: same bytes, same files, same owners.
            #expect(try Data(contentsOf: store.dataFile) == bytes)
            var after = try DirectorySnapshot(store.directory)
            if unreadable == .dataFileWithoutLockFile {
                // The only trace of the launch may be its own, empty lock file.
                let created = after.entries.removeValue(forKey: "store.lock")
                #expect(created == nil || created?.owner == before.entries["store.tinystorage"]?.owner)
            }
            #expect(after == before, "before: \(before)\nafter: \(after)")
            try setPermissions(store.dataFile, 0o600)
            #expect(try streakReadByRoot(in: parent) == 364)
        }
    }

    @Test func aStoreFolderOtherUsersCanWriteToIsRefusedAndLeftAlone() throws {
        try withTemporaryDirectory { parent throws in
            let store = try makeStreakStore(in: parent)
            try setPermissions(store.directory, 0o777)
            let before = try DirectorySnapshot(store.directory)

            let launch = try UnprivilegedHelperProcess.run(["launch-streak", parent.path, "store"])
            #expect(launch.status == 0, "\(launch.errors)")
            // Others could have replaced or removed its files: the store refuses to answer or write.
            #expect(launch.output == Self.refusedLaunch("unsafeFile"), "\(launch.errors)")
            #expect(try DirectorySnapshot(store.directory) == before)
            try setPermissions(store.directory, 0o700)
            #expect(try streakReadByRoot(in: parent) == 364)
        }
    }

    @Test func aWaitingLaunchRecoversByItselfOnceTheFileIsReadableAgain() throws {
        try withTemporaryDirectory { parent throws in
            let store = try makeStreakStore(in: parent)
            try setPermissions(store.dataFile, 0o000)
            let bytes = try Data(contentsOf: store.dataFile)

            let launch = try UnprivilegedHelperProcess(["launch-streak", parent.path, "store", "--wait"])
            let refused = launch.readLines(through: "waiting")
            #expect(refused == Self.refusedLaunch(), "\(launch.errorOutput)")
            #expect(try Data(contentsOf: store.dataFile) == bytes)

            // The launch is now waiting in `waitUntilAvailable`, with the same instance: no reopen.
            try setPermissions(store.dataFile, 0o600)
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

            // The streak went on from 364, and the earlier bytes are still the start of the log,
            // the header's durable mark aside: the launch's own background flush may rewrite it
            // in place before the launch exits.
            let log = LogFormat.framesEnd(of: [UInt8](bytes))
            let now = try Data(contentsOf: store.dataFile)
            #expect(withoutDurableMark(now.prefix(log)) == withoutDurableMark(bytes.prefix(log)))
            #expect(try committedLength(store.dataFile) > log)
            #expect(try streakReadByRoot(in: parent) == 365)
        }
    }

    /// `bytes` with the version 2 header's two durable-mark slots (bytes 40..<64, see
    /// `LogHeader.durableSlotsRange`) zeroed: a hint every process flushing the store rewrites.
    func withoutDurableMark(_ bytes: Data) -> Data {
        var bytes = Data(bytes)
        let slots = 40..<64
        if bytes.count >= slots.upperBound { bytes.resetBytes(in: slots) }
        return bytes
    }

    @Test func aLaunchThatCannotReadTheOriginalTinyStorageFileCreatesNoStore() throws {
        try withTemporaryDirectory { parent throws in
            try setPermissions(parent, 0o755)
            let directory = parent.appendingPathComponent("store", isDirectory: true)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
            try setPermissions(directory, 0o700)
            let original = directory.appendingPathComponent("tiny-storage.plist")
            let plist = try PropertyListSerialization.data(
                fromPropertyList: ["streak": Data("364".utf8)], format: .binary, options: 0)
            try plist.write(to: original)
            try Unprivileged.handOver(directory)
            try setPermissions(original, 0o000)

            let launch = try UnprivilegedHelperProcess.run(["launch-streak", parent.path, "store"])
            #expect(launch.status == 0, "\(launch.errors)")
            #expect(launch.output == Self.refusedLaunch(), "\(launch.errors)")
            // No data file of ours may shadow the original's values with an empty store.
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("store.tinystorage").path))
            #expect(try Data(contentsOf: original) == plist)
            try setPermissions(original, 0o600)
            #expect(try streakReadByRoot(in: parent) == 364)
        }
    }
}
