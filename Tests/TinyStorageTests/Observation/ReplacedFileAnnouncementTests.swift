import Foundation
import Testing

@testable import TinyStorage

/// When another instance's compaction replaces the data file, a reader announces each commit
/// once, with its writeID, in commit order — never the compacted snapshot's older values, never
/// the commits the compaction copied from the old file a second time (issue 10, G6).
/// NB: a time limit per test: a regression here waits forever (a spin or a `for await` on a
/// marker that never comes), and should fail the test, not stall the run (tests-audit N11).
@Suite(.timeLimit(.minutes(1))) struct ReplacedFileAnnouncementTests {
    @Test func commitsCopiedByAnotherInstancesCompactionAreAnnouncedOnce() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("TinyStorageTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // NB: no watchers and no background flushes: the reader catches up when it reads, so the
        // order of events is the test's.
        let quiet = Engine.Options(backgroundFlushes: false, watchesChanges: false)
        let writer = openStore(directory, options: quiet)
        let reader = openStore(directory, options: quiet)
        for index in 0..<5 { try writer.storeOrThrow(index, forKey: "k", writeID: "w\(index)") }
        try writer.storeOrThrow("x", forKey: "other")
        #expect(try reader.retrieveOrThrow(type: Int.self, forKey: "k") == 4)
        let changes = reader.rawChanges()

        // The compactor takes its snapshot (k = 4); while it writes the new file, the writer
        // commits 5, 6 and 7 to the old one, which the swap then copies to the new file.
        let duringRewrite = Locked(false)
        let io = FileIO { call, path in
            guard call == .open, path?.hasSuffix(".tmp") == true else { return nil }
            guard
                duringRewrite.withLock({ done in
                    defer { done = true }; return !done
                })
            else { return nil }
            for index in 5..<8 { try? writer.storeOrThrow(index, forKey: "k", writeID: "w\(index)") }
            return nil
        }
        let compactor = openStore(directory, io: io, options: quiet)
        try compactor.compactNow()
        #expect(duringRewrite.withLock { $0 })
        try writer.storeOrThrow(8, forKey: "k", writeID: "w8")  // to the new file

        #expect(try reader.retrieveOrThrow(type: Int.self, forKey: "k") == 8)
        try reader.storeOrThrow(true, forKey: "end")
        var seen: [(writeID: String?, value: String?)] = []
        for await change in changes {
            if change.keys == ["end"] { break }
            for (key, value) in zip(change.keys, change.values) where key == "k" {
                seen.append((change.writeID, value.map { String(decoding: $0.bytes, as: UTF8.self) }))
            }
            #expect(change.writeID != nil, "a change without writeID: \(change.keys)")
        }
        #expect(seen.map(\.writeID) == ["w5", "w6", "w7", "w8"])
        #expect(seen.map(\.value) == ["5", "6", "7", "8"])
    }
}
