import Foundation
import Testing
import TinyStorage

/// Issue 27 in real processes: `store.lock`'s page is a hint, the data file the only truth.
///
/// Store folders restored from copies taken while the store was in use (the lock file and the
/// data file copied at different moments, in either order, or only one of them put back), a
/// lock file removed or replaced while processes have the store open, and what a process killed
/// in the middle of a compaction leaves behind.
@Suite struct DataFileIsTheTruthTests {
    /// Which files of which moment are put back, while no process has the store open.
    enum Restore: String, CaseIterable, Sendable {
        /// The copy tool took `store.lock` first, then `store.tinystorage` after more commits.
        case lockOlderThanData
        /// The other way round: the data file is older than the lock file.
        case dataOlderThanLock
        /// Only the data file is put back (written over in place) from the older copy.
        case onlyDataFromOlderCopy
        /// Only the lock file is put back (written over in place) from the older copy.
        case onlyLockFromOlderCopy
        /// As `lockOlderThanData`, with a compaction between the two copies (the files'
        /// generations differ).
        case lockOlderAcrossACompaction
        /// As `dataOlderThanLock`, with a compaction between the two copies.
        case dataOlderAcrossACompaction

        var compactsBetweenCopies: Bool { self == .lockOlderAcrossACompaction || self == .dataOlderAcrossACompaction }
    }

    /// The keys a helper process reads, as `key=value` lines; fails the test when it reports
    /// anything on the way (a data loss, an unavailable store).
    func keysReadByAnotherProcess(_ directory: URL) throws -> [String] {
        let dump = try Helper.run(["dump", directory.path, "store"])
        #expect(dump.status == 0, "\(dump.errors)")
        #expect(!dump.errors.contains("reported:"), "a restored copy is not damage: \(dump.errors)")
        return dump.output
    }

    func write(_ key: String, _ value: Int, in directory: URL) throws {
        let run = try Helper.run(["write", directory.path, "store", key, "\(value)"])
        #expect(run.status == 0, "\(run.errors)")
    }

    @Test(arguments: Restore.allCases)
    func aRestoredCopyLosesNoRecordItsDataFileHolds(restore: Restore) throws {
        try withTemporaryDirectory { directory throws in
            let folder = directory.appendingPathComponent("store")
            let lockFile = folder.appendingPathComponent("store.lock")
            let dataFile = folder.appendingPathComponent("store.tinystorage")
            for index in 1...5 { try write("k\(index)", index, in: directory) }
            let olderLock = try Data(contentsOf: lockFile)
            let olderData = try Data(contentsOf: dataFile)
            if restore.compactsBetweenCopies { try openStore(directory).compactNow() }
            for index in 6...10 { try write("k\(index)", index, in: directory) }
            let newerLock = try Data(contentsOf: lockFile)
            let newerData = try Data(contentsOf: dataFile)

            switch restore {
            case .lockOlderThanData, .lockOlderAcrossACompaction, .dataOlderThanLock, .dataOlderAcrossACompaction:
                // NB: the folder put back whole, as a restore does: new files.
                let older = restore == .lockOlderThanData || restore == .lockOlderAcrossACompaction
                try FileManager.default.removeItem(at: folder)
                try FileManager.default.createDirectory(
                    at: folder, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
                try (older ? olderLock : newerLock).write(to: lockFile)
                try (older ? newerData : olderData).write(to: dataFile)
            case .onlyDataFromOlderCopy:
                try overwriteInPlace(dataFile, with: olderData)
            case .onlyLockFromOlderCopy:
                try overwriteInPlace(lockFile, with: olderLock)
            }
            let restored = try TinyStorage.inspect(storeDirectory: folder)
            let held = restored.entries.keys.sorted()
            #expect(
                held.count
                    == (restore == .dataOlderThanLock || restore == .dataOlderAcrossACompaction
                        || restore == .onlyDataFromOlderCopy ? 5 : 10))

            // Every key the restored data file holds is read, by a process of its own, with no error.
            let read = try keysReadByAnotherProcess(directory)
            #expect(read.count == held.count, "\(read)")
            // The next commit lands after them: none is overwritten.
            try write("new", 1, in: directory)
            let after = try keysReadByAnotherProcess(directory)
            #expect(after.count == held.count + 1, "\(after)")
            let inspection = try TinyStorage.inspect(storeDirectory: folder)
            #expect(inspection.isHealthy, "\(inspection.damagedRanges)")
            #expect(inspection.entries.keys.sorted() == (held + ["new"]).sorted())
        }
    }

    /// Writes `bytes` over the file's contents in place (same file, as `cp` onto an existing
    /// file does), making it that long.
    func overwriteInPlace(_ url: URL, with bytes: Data) throws {
        let handle = try FileHandle(forUpdating: url)
        defer { try? handle.close() }
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: bytes)
    }

    /// `store.lock` removed (or replaced by a copy) while two processes have the store open: they
    /// go on with the file they opened, excluding each other; a third process refuses to open the
    /// store instead of committing under another lock. No update is lost, no record damaged.
    @Test(arguments: [false, true])
    func aLockFileReplacedUnderRunningProcessesLosesNoUpdate(copyBack: Bool) throws {
        try withTemporaryDirectory { directory throws in
            let times = 1_500
            try write("counter", 0, in: directory)
            func incrementing() throws -> HelperProcess {
                try HelperProcess(
                    ["increment", directory.path, "store", "counter", "\(times)", "--wait-for-go"], withInput: true)
            }
            let running = try [incrementing(), incrementing()]
            for helper in running { #expect(helper.readLine() == "ready", "\(helper.errorOutput)") }
            let lockFile = directory.appendingPathComponent("store/store.lock")
            let aside = directory.appendingPathComponent("aside.lock")
            try FileManager.default.moveItem(at: lockFile, to: aside)
            if copyBack { try FileManager.default.copyItem(at: aside, to: lockFile) }

            let late = try incrementing()
            let lateOpened = late.readLine() == "ready"
            #expect(!lateOpened, "a process opening the store now must refuse, not commit under another lock")
            for helper in running + (lateOpened ? [late] : []) { try helper.send("go") }
            for helper in running { #expect(helper.waitForExit() == 0, "\(helper.errorOutput)") }
            let lateStatus = late.waitForExit()
            if !lateOpened {
                #expect(lateStatus != 0)
                #expect(late.errorOutput.contains("was removed or replaced while another process had the store open"))
            }
            let expected = 2 * times + (lateOpened && lateStatus == 0 ? times : 0)
            #expect(try keysReadByAnotherProcess(directory) == ["{\"key\":\"counter\",\"value\":\(expected)}"])
            let inspection = try TinyStorage.inspect(storeDirectory: directory.appendingPathComponent("store"))
            #expect(inspection.isHealthy, "\(inspection.damagedRanges)")
        }
    }

    /// A process killed in the middle of a compaction, its new file written under a temporary
    /// name and not yet renamed, leaves that file behind; the next process to open the store
    /// removes it, and loses nothing.
    @Test func aTemporaryFileLeftByAKilledCompactionIsRemovedByTheNextOpen() throws {
        try withTemporaryDirectory { directory throws in
            let folder = directory.appendingPathComponent("store")
            try write("kept", 7, in: directory)

            let holder = try HelperProcess(["hold-commit-lock", directory.path, "store", "temporary-file"])
            try #require(holder.readLine() == "holding", "the helper never got there: \(holder.errorOutput)")
            _ = holder.killHard()
            try #require(try temporaryFiles(in: folder).count == 1, "the killed compaction left no file")

            #expect(try keysReadByAnotherProcess(directory) == ["{\"key\":\"kept\",\"value\":7}"])
            #expect(try temporaryFiles(in: folder).isEmpty, "left after the next open")
        }
    }

    /// The temporary files in `folder`; none when the folder is not there yet (a kill that landed
    /// before the writer created the store).
    func temporaryFiles(in folder: URL) throws -> [String] {
        guard FileManager.default.fileExists(atPath: folder.path) else { return [] }
        return try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".tmp") }
    }
}
