import Foundation
import Testing
import TinyStorage

/// G4 and G5 for the cross-process commit lock itself (issue 12): a process killed with
/// SIGKILL while it holds the lock — on Linux a robust mutex in the lock file's shared page, on
/// Apple platforms `flock` — blocks no other process, and loses nothing acknowledged. Whatever
/// it left (half a record, a record half published) is dealt with as a crash's torn tail; a
/// file it renamed into place without publishing it is checked from its start by the next opener.
@Suite struct CommitLockDeathTests {
    /// Commits 20 values here, then has a helper take the lock, leave `remains` and be killed
    /// holding it; another process and this one then commit, and a third reads everything.
    @Test(arguments: CommitLockRemains.allCases)
    func aProcessKilledHoldingTheCommitLockBlocksNobodyAndLosesNothing(remains: CommitLockRemains) throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            for index in 0..<20 { try storage.storeOrThrow(index, forKey: "k\(index)") }

            let holder = try HelperProcess(["hold-commit-lock", directory.path, "store", remains.rawValue])
            try #require(holder.readLine() == "holding", "the helper never took the lock: \(holder.errorOutput)")
            _ = holder.killHard()

            // Another process commits: it takes the lock the dead one held.
            let writer = try Helper.run(["write", directory.path, "store", "after", "42"])
            #expect(writer.status == 0, "the writer failed: \(writer.errors)")
            // This process, whose store was open all along, commits and reads.
            try storage.storeOrThrow(7, forKey: "mine")
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "after") == 42)

            // A fresh process sees every acknowledged commit, and of the dead one's, never half.
            let dump = try Helper.run(["dump", directory.path, "store"])
            #expect(dump.status == 0, "dump failed: \(dump.errors)")
            var expected = (0..<20).map { "{\"key\":\"k\($0)\",\"value\":\($0)}" }
            expected += ["{\"key\":\"after\",\"value\":42}", "{\"key\":\"mine\",\"value\":7}"]
            let unacknowledged = "{\"key\":\"unacknowledged\",\"value\":\"\(remains.rawValue)\"}"
            let lines = Set(dump.output)
            #expect(lines.subtracting([unacknowledged]) == Set(expected))
            if remains != .halfPublished {
                // Published nothing of it: it is not there. (A whole record half published may
                // be: a commit never acknowledged holds the old value or the new.)
                #expect(!lines.contains(unacknowledged))
            }
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "k19") == 19)

            let quarantined =
                (try? FileManager.default.contentsOfDirectory(
                    atPath: directory.appendingPathComponent("store/quarantine").path)) ?? []
            if remains == .tornRecord {
                #expect(
                    quarantined.contains { $0.hasPrefix("interrupted-write") },
                    "the half record was not set aside: \(quarantined)")
            } else {
                #expect(quarantined.isEmpty)
            }
        }
    }
}
