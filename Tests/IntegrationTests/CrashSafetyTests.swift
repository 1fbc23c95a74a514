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

/// G4 with real `kill -9`: a writer process is killed at an arbitrary instant, again and again on
/// the same store; every write it acknowledged survives, nothing it did not write appears, and
/// batches are all-or-nothing.
@Suite struct CrashSafetyTests {
    /// The engine compacts once the log reaches this size (`Engine.minimumCompactionSize`).
    static let compactionSize = 1 << 20

    /// Grows the log with dead data until it ends about a kilobyte short of the compaction
    /// threshold, so the next writer process compacts within its first few dozen commits.
    func bringLogNearCompaction(_ directory: URL) throws {
        let storage = openStore(directory)
        for round in 0... {
            let remaining = Self.compactionSize - 1_024 - (try committedLength(storage.fileURL))
            guard remaining > 200 else { break }
            try #require(round < 100, "the log does not grow past \(Self.compactionSize - 1_024 - remaining) bytes")
            let filler = "\(round)" + String(repeating: "f", count: min(64 << 10, remaining - 100))
            try storage.storeOrThrow(filler, forKey: "filler")
        }
        try storage.storeOrThrow(nil, forKey: "filler")
    }

    /// Kills `helper` with SIGKILL at an arbitrary point of its work and returns the acks it printed
    /// that were not read yet.
    ///
    /// NB: the random pause is not synchronization (nothing waits for anything): killing right
    /// after an ack arrives would mostly hit the writer just after a commit; the pause spreads the
    /// kills over whole commits (encoding, appending, publishing, compacting).
    func killAtAnArbitraryPoint(_ helper: HelperProcess) -> [[Substring]] {
        usleep(UInt32.random(in: 0...2_000))
        return helper.killHard().map { $0.split(separator: " ").dropFirst().map { $0 } }
    }

    /// Reads "ack …" lines until `count` have arrived; fails with the helper's errors if it dies first.
    func readAcks(_ count: Int, from helper: HelperProcess) throws -> [[Substring]] {
        var acks: [[Substring]] = []
        while acks.count < count {
            guard let line = helper.readLine() else {
                Issue.record("the helper stopped after \(acks.count) acks: \(helper.errorOutput)")
                throw CancellationError()
            }
            acks.append(line.split(separator: " ").dropFirst().map { $0 })
        }
        return acks
    }

    @Test func everyAcknowledgedWriteSurvivesKillDashNine() throws {
        try withTemporaryDirectory { directory throws in
            let keyCount = 7
            let keys = (0..<keyCount).map { "k\($0)" }
            // Opened once before every round: it must follow other processes' commits,
            // compactions and repairs, and agree with a fresh instance after each round.
            let longLived = openStore(directory)
            let dataFile = longLived.fileURL
            #expect(longLived.allKeys.isEmpty)
            var stored: [String: Int] = [:]  // what the store held after the previous round
            var start = 1
            let initialGeneration = try headerGeneration(dataFile)
            var generationsSeen = Set<UInt64>()

            for round in 0..<20 {
                if round % 5 == 2 { try bringLogNearCompaction(directory) }
                let generationBefore = try headerGeneration(dataFile)
                let helper = try HelperProcess(["write-loop", directory.path, "store", "\(keyCount)", "\(start)"])
                var acks = try readAcks(50 + round * 37, from: helper)
                // NB: the writer compacts in the background once past the threshold. In every
                // other round near it, the kill waits until that compaction has renamed its file
                // into place (the acks go on meanwhile), so kills land after compactions too; in
                // the rounds between, it may land in the middle of one.
                if round % 10 == 2 {
                    while try headerGeneration(dataFile) == generationBefore {
                        try #require(acks.count < 1_000_000, "round \(round): the writer never compacted")
                        acks += try readAcks(1, from: helper)
                    }
                }
                acks += killAtAnArbitraryPoint(helper)
                #expect(helper.waitForExit() == -SIGKILL, "round \(round): \(helper.errorOutput)")

                var acknowledged: [String: Int] = [:]
                for ack in acks {
                    let key = String(ack[0])
                    let value = try #require(Int(ack[1]))
                    #expect(key == "k\(value % keyCount)")
                    #expect(value > acknowledged[key] ?? Int.min, "acks out of order")
                    acknowledged[key] = value
                }
                let lastAck = try #require(acks.last.flatMap { Int($0[1]) })
                // The one write that may have been committed but not acknowledged when the kill came.
                let inFlight = lastAck + 1

                let logger = CollectingLogger()
                let reopened = openStore(directory, logger: logger)
                #expect(reopened.availability.isAvailable, "round \(round): \(logger.all)")
                for key in keys {
                    let value = try reopened.retrieveOrThrow(type: Int.self, forKey: key)
                    let expected = acknowledged[key] ?? stored[key]
                    let allowed = value == expected || (value == inFlight && key == "k\(inFlight % keyCount)")
                    let found = value.map(String.init) ?? "nothing"
                    let acknowledgedText = expected.map(String.init) ?? "nothing"
                    #expect(
                        allowed,
                        "round \(round), \(key): found \(found), last acknowledged \(acknowledgedText), in flight \(inFlight)"
                    )
                    stored[key] = value
                }
                #expect(Set(reopened.allKeys.map(\.rawValue)).isSubset(of: Set(keys)))
                #expect(try longLived.rawEntries() == reopened.rawEntries(), "round \(round)")
                generationsSeen.insert(try headerGeneration(dataFile))
                if round % 10 == 2 {
                    #expect(
                        try headerGeneration(dataFile) > generationBefore, "round \(round): the writer never compacted")
                }
                start = inFlight + 1
            }
            #expect(generationsSeen.contains { $0 > initialGeneration })
            // The store keeps working for this process afterwards.
            try longLived.storeOrThrow(-1, forKey: "k0")
            #expect(openStore(directory).integer(forKey: "k0") == -1)
        }
    }

    @Test func bulkStoresAreAllOrNothingUnderKillDashNine() throws {
        try withTemporaryDirectory { directory throws in
            let keys = (0..<50).map { "b\($0)" }
            let dataFile = openStore(directory).fileURL
            var previous = 0
            var start = 1
            for round in 0..<10 {
                if round == 4 { try bringLogNearCompaction(directory) }
                let generationBefore = try headerGeneration(dataFile)
                let helper = try HelperProcess(["bulk-loop", directory.path, "store", "\(start)"])
                var acks = try readAcks(20 + round * 15, from: helper)
                // NB: the kill waits until the writer's background compaction renamed its file.
                while round == 4, try headerGeneration(dataFile) == generationBefore {
                    try #require(acks.count < 1_000_000, "round \(round): the writer never compacted")
                    acks += try readAcks(1, from: helper)
                }
                acks += killAtAnArbitraryPoint(helper)
                #expect(helper.waitForExit() == -SIGKILL, "round \(round): \(helper.errorOutput)")
                let lastAck = try #require(acks.last.flatMap { Int($0[0]) })

                let reopened = openStore(directory)
                #expect(reopened.availability.isAvailable)
                let generations = try keys.map { try reopened.retrieveOrThrow(type: Int.self, forKey: $0) }
                #expect(Set(generations).count == 1, "round \(round): a batch was torn: \(Set(generations))")
                let generation = try #require(generations.first ?? nil, "round \(round): no generation stored")
                #expect(
                    generation == lastAck || generation == lastAck + 1,
                    "round \(round): \(generation) vs ack \(lastAck)")
                #expect(generation > previous)
                if round == 4 {
                    #expect(
                        try headerGeneration(dataFile) > generationBefore, "round \(round): the writer never compacted")
                }
                previous = generation
                start = lastAck + 2
            }
        }
    }
}
