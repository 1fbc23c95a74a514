import Foundation
import Testing

@testable import TinyStorage

/// The log is rewritten when it holds much more than the live data; nothing is lost, and other
/// instances that opened the old file follow the new one.
@Suite struct CompactionTests {
    @Test(arguments: [
        (0, 0, false), (Engine.minimumCompactionSize - 1, 0, false), (Engine.minimumCompactionSize, 0, true),
        (Engine.minimumCompactionSize, Engine.minimumCompactionSize / Engine.compactionRatio, true),
        (Engine.minimumCompactionSize, Engine.minimumCompactionSize / Engine.compactionRatio + 1, false),
        (10 * Engine.minimumCompactionSize, 2 * Engine.minimumCompactionSize, true),
        (10 * Engine.minimumCompactionSize, 3 * Engine.minimumCompactionSize, false),
    ])
    func compactionThreshold(end: Int, liveBytes: Int, expected: Bool) {
        #expect(Engine.shouldCompact(end: end, liveBytes: liveBytes) == expected)
    }

    @Test func overwritesCompactTheLogAndEveryKeyKeepsItsLatestValue() throws {
        try withTemporaryDirectory { directory throws in
            let writer = openStore(directory)
            let other = openStore(directory)  // writes interleaved from a second instance
            let bystander = openStore(directory)  // opened before the compaction, used only after it
            #expect(bystander.allKeys.isEmpty)
            let initialGeneration = try headerGeneration(writer.fileURL)

            var model: [String: String] = [:]
            var sizes: [Int] = []
            var written = 0
            let value = String(repeating: "v", count: 1_000)
            for round in 0..<1_600 {
                let big = "\(round) " + value
                try writer.storeOrThrow(big, forKey: "big")
                model["big"] = big
                written += big.utf8.count
                if round % 10 == 0 {
                    let key = "small\(round % 70)"
                    try other.storeOrThrow("\(round)", forKey: key)
                    model[key] = "\(round)"
                }
                if round % 25 == 0 {
                    try writer.storeOrThrow(nil, forKey: "small\((round + 10) % 70)")
                    model["small\((round + 10) % 70)"] = nil
                }
                sizes.append(try committedLength(writer.fileURL))
            }
            #expect(written > 1_500_000)
            Engine.waitForBackgroundCompactions()
            // NB: the length after the background compaction too: whether it ran during the loop
            // or only after it depends on the shared compaction queue, busy with other tests'.
            sizes.append(try committedLength(writer.fileURL))

            // The file shrank at least once, its header generation moved on, and it stays small:
            // compactions run in the background, and a log twice the threshold is compacted by
            // the commit that reaches it.
            let shrank = zip(sizes, sizes.dropFirst()).contains { $1 < $0 }
            #expect(shrank, "the log never shrank; sizes end at \(sizes.suffix(3))")
            #expect(try headerGeneration(writer.fileURL) > initialGeneration)
            #expect(try committedLength(writer.fileURL) < Engine.minimumCompactionSize)
            #expect(sizes.max() ?? 0 < 2 * Engine.minimumCompactionSize + 20_000)
            #expect(!FileManager.default.fileExists(atPath: writer.fileURL.path + ".compacting"))

            for storage in [writer, other, bystander, openStore(directory)] {
                let entries = try storage.rawJSON()
                #expect(Set(entries.keys) == Set(model.keys))
                for (key, expected) in model {
                    #expect(try storage.retrieveOrThrow(type: String.self, forKey: key) == expected, "key \(key)")
                }
            }

            // The instance that slept through the compaction can write, and everyone sees it.
            try bystander.storeOrThrow("from bystander", forKey: "late")
            #expect(writer.retrieve(type: String.self, forKey: "late") == "from bystander")
            #expect(openStore(directory).retrieve(type: String.self, forKey: "late") == "from bystander")
        }
    }

    @Test func compactionPreservesEveryKindOfValueAcrossReopen() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let bytes = Data((0...255).map { UInt8($0) })
            try storage.storeOrThrow(bytes, forKey: "data")
            try storage.storeOrThrow(["nested": ["a": 1]], forKey: "dict")
            try storage.storeOrThrow("日本語 \"q\" \\", forKey: "text")
            try storage.storeOrThrow(-0.0, forKey: "double")
            let key = String(repeating: "k", count: TinyStorage.maximumKeyLength)
            try storage.storeOrThrow(true, forKey: key)
            let generation = try headerGeneration(storage.fileURL)
            let filler = String(repeating: "f", count: 16 << 10)
            var round = 0
            while try headerGeneration(storage.fileURL) == generation {
                try storage.storeOrThrow("\(round)" + filler, forKey: "filler")
                round += 1
                try #require(round < 1_000, "no compaction")
            }
            for candidate in [storage, openStore(directory)] {
                #expect(candidate.retrieve(type: Data.self, forKey: "data") == bytes)
                #expect(candidate.retrieve(type: [String: [String: Int]].self, forKey: "dict") == ["nested": ["a": 1]])
                #expect(candidate.retrieve(type: String.self, forKey: "text") == "日本語 \"q\" \\")
                #expect(candidate.retrieve(type: Double.self, forKey: "double")?.sign == .minus)
                #expect(candidate.bool(forKey: key))
                #expect(candidate.retrieve(type: String.self, forKey: "filler") == "\(round - 1)" + filler)
                #expect(candidate.allKeys.count == 6)
            }
        }
    }

    /// The commit that makes the log worth compacting returns without waiting for the compaction,
    /// which runs in the background (here held inside the flush of its new file), and commits go on
    /// meanwhile; every one of them is in the compacted file.
    @Test func theCommitThatCallsForACompactionDoesNotWaitForIt() throws {
        try withTemporaryDirectory { directory throws in
            let held = HeldFlush()
            let storage = openStore(directory, io: held.io, options: Engine.Options(backgroundFlushes: false))
            let generation = try headerGeneration(storage.fileURL)
            let filler = String(repeating: "f", count: 16 << 10)
            for round in 0... {
                guard try committedLength(storage.fileURL) + 20_000 < Engine.minimumCompactionSize else { break }
                try #require(round < 100)
                try storage.storeOrThrow("\(round)" + filler, forKey: "filler")
            }
            held.hold()
            let returned = held.finishesWhileHeld {
                try? storage.storeOrThrow("crossing" + filler, forKey: "filler")
                held.waitUntilHeld()  // the compaction, in the background, is flushing its new file
                for index in 0..<10 { try? storage.storeOrThrow(index, forKey: "during\(index)") }
            }
            #expect(returned, "the commit waited for the compaction it called for")
            Engine.waitForBackgroundCompactions()
            #expect(try headerGeneration(storage.fileURL) > generation)
            #expect(try committedLength(storage.fileURL) < 100_000)
            for view in [storage, openStore(directory)] {
                #expect(view.retrieve(type: String.self, forKey: "filler") == "crossing" + filler)
                for index in 0..<10 { #expect(view.integer(forKey: "during\(index)") == index) }
            }
        }
    }

    /// A log that reaches twice the compaction threshold while its background compaction has not
    /// run (here the compaction queue is held) is compacted before the commit that reached it
    /// returns: however fast a store is written, its file stays bounded.
    @Test func aLogTwiceTheThresholdIsCompactedBeforeTheCommitReturns() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory, options: Engine.Options(backgroundFlushes: false))
            let generation = try headerGeneration(storage.fileURL)
            let filler = String(repeating: "f", count: 16 << 10)
            let release = hold(Engine.compactionQueue)
            var round = 0
            while try committedLength(storage.fileURL) + 40_000 < 2 * Engine.minimumCompactionSize {
                try storage.storeOrThrow("\(round)" + filler, forKey: "filler")
                round += 1
            }
            // Past the threshold, the compaction is only scheduled: the queue is held.
            #expect(try committedLength(storage.fileURL) > Engine.minimumCompactionSize)
            #expect(try headerGeneration(storage.fileURL) == generation)
            release()
            while try committedLength(storage.fileURL) < 2 * Engine.minimumCompactionSize,
                try headerGeneration(storage.fileURL) == generation
            {
                try storage.storeOrThrow("\(round)" + filler, forKey: "filler")
                round += 1
            }
            // The commit that reached twice the threshold waited for the queue: compacted now.
            #expect(try headerGeneration(storage.fileURL) > generation)
            #expect(try committedLength(storage.fileURL) < Engine.minimumCompactionSize)
            #expect(openStore(directory).retrieve(type: String.self, forKey: "filler") == "\(round - 1)" + filler)
        }
    }

    @Test func aStoreOfMostlyLiveDataIsNotCompacted() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let generation = try headerGeneration(storage.fileURL)
            let value = String(repeating: "x", count: 10_000)
            for index in 0..<150 { try storage.storeOrThrow(value, forKey: "key\(index)") }
            Engine.waitForBackgroundCompactions()
            #expect(try committedLength(storage.fileURL) > Engine.minimumCompactionSize)
            #expect(try headerGeneration(storage.fileURL) == generation)
        }
    }

    /// Commits made while a compaction rewrites the file are copied to the new file before the
    /// swap, without the cross-process lock: the swap itself reads one frame of the old file
    /// when nothing more arrived, where the file confirms that nothing lies past what was
    /// copied (the page saying so is a hint), and copies nothing (issue 10: the lock is held for
    /// the swap only).
    @Test func commitsMadeDuringTheRewriteAreCopiedOutsideTheLock() throws {
        try withTemporaryDirectory { directory throws in
            let quiet = Engine.Options(backgroundFlushes: false, watchesChanges: false)
            let writer = openStore(directory, options: quiet)
            for index in 0..<50 {
                try writer.storeOrThrow(String(repeating: "x", count: index), forKey: "k\(index % 5)")
            }
            let rewriting = Locked(false)
            let readsUnderTheLock = Locked(0)
            let io = FileIO { call, path in
                if call == .open, path?.hasSuffix(".tmp") == true, !rewriting.withLock({ $0 }) {
                    rewriting.withLock { $0 = true }
                    for index in 0..<20 { try? writer.storeOrThrow(index, forKey: "during\(index)") }
                }
                if call == .read, rewriting.withLock({ $0 }), LockWitness.isHolding(.file) {
                    readsUnderTheLock.withLock { $0 += 1 }
                }
                return nil
            }
            let compactor = openStore(directory, io: io, options: quiet)
            _ = try compactor.rawJSON()  // opened before the rewrite
            try compactor.compactNow()
            #expect(rewriting.withLock { $0 })
            #expect(readsUnderTheLock.withLock { $0 } == 1)
            let reopened = openStore(directory, options: quiet)
            #expect(try reopened.rawJSON() == writer.rawJSON())
            #expect(reopened.integer(forKey: "during19") == 19)
        }
    }
}
