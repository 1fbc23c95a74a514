import Foundation
import Testing

@testable import TinyStorage

/// The scanner reads untrusted bytes: it must never crash, never apply a record that does not
/// verify, and stop exactly at the first damage.
@Suite struct LogScannerTests {
    /// Random commits with a printed seed, so any failure replays with `TINYSTORAGE_TEST_SEED`.
    static func randomCommits<G: RandomNumberGenerator>(_ count: Int, using generator: inout G) -> [LogCommit] {
        (0..<count).map { _ in
            var commit = LogCommit(operations: [])
            commit.clearsFirst = Int.random(in: 0..<20, using: &generator) == 0
            if Bool.random(using: &generator) { commit.writeID = UUID().uuidString }
            for _ in 0..<Int.random(in: 0...4, using: &generator) {
                let key = "key\(Int.random(in: 0..<30, using: &generator))"
                if Int.random(in: 0..<4, using: &generator) == 0 {
                    commit.operations.append(.remove(key: key))
                } else {
                    let value = Data.random(count: Int.random(in: 0...60, using: &generator), using: &generator)
                    commit.operations.append(.put(key: key, value: value))
                }
            }
            return commit
        }
    }

    func scan(_ bytes: [UInt8], from start: Int = 0) -> (commits: [LogCommit], end: Int, stop: LogScanner.Stop) {
        var commits: [LogCommit] = []
        let result = bytes.withUnsafeBytes { LogScanner.scan($0, from: start) { commits.append($0) } }
        return (commits, result.end, result.stop)
    }

    @Test func aCleanLogScansCompletely() {
        let seed = SeededGenerator.makeSeed()
        var generator = SeededGenerator(seed: seed)
        let commits = Self.randomCommits(200, using: &generator)
        let bytes = commits.flatMap { $0.encoded() }
        let result = scan(bytes)
        #expect(result.commits == commits, "seed \(seed)")
        #expect(result.end == bytes.count)
        #expect(result.stop == .end)
        // Zero fill after the last record (preallocated space) is a clean end too.
        let padded = scan(bytes + [UInt8](repeating: 0, count: 4_096))
        #expect(padded.commits == commits)
        #expect(padded.end == bytes.count)
        #expect(padded.stop == .end)
    }

    @Test func everyTruncationStopsAtTheLastCompleteRecord() {
        let seed = SeededGenerator.makeSeed()
        var generator = SeededGenerator(seed: seed)
        let commits = Self.randomCommits(12, using: &generator)
        var boundaries = [0]
        var bytes: [UInt8] = []
        for commit in commits {
            bytes += commit.encoded()
            boundaries.append(bytes.count)
        }
        for length in 0...bytes.count {
            let complete = boundaries.lastIndex { $0 <= length } ?? 0
            let result = scan(Array(bytes[..<length]))
            #expect(result.commits == Array(commits[..<complete]), "seed \(seed), length \(length)")
            #expect(result.end == boundaries[complete])
            let expectedStop: LogScanner.Stop =
                boundaries[complete] == length ? .end : .incomplete(offset: boundaries[complete])
            #expect(result.stop == expectedStop, "seed \(seed), length \(length)")
        }
    }

    @Test func everySingleByteFlipIsCaughtAtItsRecord() {
        let seed = SeededGenerator.makeSeed()
        var generator = SeededGenerator(seed: seed)
        let commits = Self.randomCommits(6, using: &generator)
        var boundaries = [0]
        var bytes: [UInt8] = []
        for commit in commits {
            bytes += commit.encoded()
            boundaries.append(bytes.count)
        }
        for index in bytes.indices {
            var damaged = bytes
            damaged[index] ^= UInt8.random(in: 1...255, using: &generator)
            let record = boundaries.lastIndex { $0 <= index } ?? 0
            let result = scan(damaged)
            #expect(result.commits == Array(commits[..<record]), "seed \(seed), byte \(index)")
            #expect(result.end == boundaries[record], "seed \(seed), byte \(index)")
            #expect(result.stop.offset == boundaries[record], "seed \(seed), byte \(index): \(result.stop)")
        }
    }

    @Test func salvageRecoversEveryRecordButTheDamagedOnes() {
        let seed = SeededGenerator.makeSeed()
        var generator = SeededGenerator(seed: seed)
        let commits = Self.randomCommits(8, using: &generator)
        var boundaries = [0]
        var bytes: [UInt8] = []
        for commit in commits {
            bytes += commit.encoded()
            boundaries.append(bytes.count)
        }
        for _ in 0..<300 {
            // Damage one or two records anywhere inside them.
            var damagedRecords = Set<Int>()
            var damaged = bytes
            for _ in 0..<Int.random(in: 1...2, using: &generator) {
                let record = Int.random(in: 0..<commits.count, using: &generator)
                let index = Int.random(in: boundaries[record]..<boundaries[record + 1], using: &generator)
                damaged[index] ^= UInt8.random(in: 1...255, using: &generator)
                damagedRecords.insert(record)
            }
            var recovered: [LogCommit] = []
            let ranges = damaged.withUnsafeBytes { LogScanner.salvage($0, from: 0) { recovered.append($0) } }
            let expected = commits.indices.filter { !damagedRecords.contains($0) }.map { commits[$0] }
            #expect(recovered == expected, "seed \(seed), damaged records \(damagedRecords.sorted())")
            for record in damagedRecords {
                let span = boundaries[record]..<boundaries[record + 1]
                #expect(ranges.contains { $0.overlaps(span) }, "seed \(seed): record \(record) not reported")
            }
            for range in ranges {
                #expect(
                    damagedRecords.contains { range.overlaps(boundaries[$0]..<boundaries[$0 + 1]) },
                    "seed \(seed): \(range) reported, damaged \(damagedRecords.sorted())")
            }
        }
    }

    @Test func randomMutationsNeverCrashAndOnlyEverYieldAPrefix() {
        let seed = SeededGenerator.makeSeed()
        var generator = SeededGenerator(seed: seed)
        let commits = Self.randomCommits(30, using: &generator)
        let bytes = commits.flatMap { $0.encoded() }
        for iteration in 0..<2_000 {
            var damaged = bytes
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                switch Int.random(in: 0..<4, using: &generator) {
                case 0:
                    let index = Int.random(in: damaged.indices, using: &generator)
                    damaged[index] = UInt8.random(in: 0...255, using: &generator)
                case 1:
                    damaged.removeLast(Int.random(in: 0...min(40, damaged.count - 1), using: &generator))
                case 2:
                    let index = Int.random(in: 0...damaged.count, using: &generator)
                    damaged.insert(
                        contentsOf: Data.random(count: Int.random(in: 1...9, using: &generator), using: &generator),
                        at: index)
                default:
                    let index = Int.random(in: 0..<damaged.count, using: &generator)
                    damaged.removeSubrange(index..<min(damaged.count, index + Int.random(in: 1...9, using: &generator)))
                }
                if damaged.isEmpty { damaged = [0xFF] }
            }
            let result = scan(damaged)
            #expect(result.end <= damaged.count)
            #expect(result.commits.count <= commits.count)
            #expect(
                result.commits == Array(commits.prefix(result.commits.count)), "seed \(seed), iteration \(iteration)")
        }
    }

    @Test func randomGarbageNeverCrashes() {
        let seed = SeededGenerator.makeSeed()
        var generator = SeededGenerator(seed: seed)
        for _ in 0..<2_000 {
            let garbage = [UInt8](Data.random(count: Int.random(in: 0...300, using: &generator), using: &generator))
            let result = scan(garbage)
            #expect(result.end <= garbage.count)
        }
    }

    @Test func impossibleLengthsAreCorruptionNotAllocations() {
        var bytes = LogCommit(operations: [.put(key: "a", value: Data("1".utf8))]).encoded()
        bytes.replaceSubrange(0..<4, with: [0xFF, 0xFF, 0xFF, 0x7F])
        let result = scan(bytes)
        #expect(result.commits.isEmpty)
        if case .corrupt(let offset, _) = result.stop { #expect(offset == 0) } else { Issue.record("\(result.stop)") }
    }

    @Test func aZeroLengthFollowedByDataIsCorruption() {
        let record = LogCommit(operations: [.put(key: "a", value: Data("1".utf8))]).encoded()
        let bytes = record + [0, 0, 0, 0, 0, 0, 0, 0] + record
        let result = scan(bytes)
        #expect(result.commits.count == 1)
        #expect(result.stop == .corrupt(offset: record.count, reason: "a zero length followed by data"))
    }

    @Test func aRecordWithAValidChecksumButMalformedPayloadIsCorruption() {
        // A payload whose operation count promises more operations than it holds.
        var payload: [UInt8] = [LogFormat.commitKind, 0]
        payload.appendLittleEndian(UInt32(3))
        var bytes: [UInt8] = []
        bytes.appendLittleEndian(UInt32(payload.count))
        let lengthCRC = bytes.withUnsafeBytes { crc32c($0) }
        bytes.appendLittleEndian(payload.withUnsafeBytes { crc32c($0, startingWith: lengthCRC) })
        bytes += payload
        let result = scan(bytes)
        #expect(result.commits.isEmpty)
        #expect(result.stop == .corrupt(offset: 0, reason: "a malformed record"))
    }

    /// Keys are made from their bytes without `String(decoding:as:)`: they must read back the same,
    /// invalid UTF-8 repaired the same way, on either side of the small-string limit (15 bytes).
    @Test(
        arguments: [
            [], Array("a".utf8), Array("key-000500".utf8), Array("fifteen-bytes!!".utf8),
            Array("sixteen-bytes!!!".utf8),
            Array("a key much longer than any small string can hold".utf8), Array("clé-é".utf8), Array("😀".utf8),
            [0xFF], [0x61, 0xC3], [0x61, 0xE2, 0x82, 0x61], [0xED, 0xA0, 0x80], Array(repeating: 0x80, count: 20),
        ] as [[UInt8]])
    func keysAreMadeAsStringDecodingMakesThem(bytes: [UInt8]) {
        let made = bytes.withUnsafeBytes { LogScanner.makeKey($0) }
        let decoded = String(decoding: bytes, as: UTF8.self)
        #expect(made == decoded)
        #expect(Array(made.utf8) == Array(decoded.utf8))
    }

    /// Loading hands over operations as bytes, not commits: what it hands over must be exactly
    /// what ``LogScanner/scan(_:from:version:sequencedAfter:makeValue:apply:)`` reads.
    @Test func scanningOperationsReadsWhatScanningCommitsReads() {
        let seed = SeededGenerator.makeSeed()
        var generator = SeededGenerator(seed: seed)
        var commits = Self.randomCommits(200, using: &generator)
        for index in commits.indices { commits[index].sequence = UInt64(index + 1) }
        let bytes = commits.flatMap { $0.encoded() }
        var expected: [String] = []
        _ = bytes.withUnsafeBytes {
            LogScanner.scan($0, from: 0, sequencedAfter: 0) { commit in
                expected.append("record \(commit.sequence) \(commit.clearsFirst)")
                for operation in commit.operations { expected.append("\(operation)") }
            }
        }
        var handed: [String] = []
        let result = bytes.withUnsafeBytes {
            LogScanner.scanOperations(
                $0, from: 0, version: LogFormat.version, sequencedAfter: 0,
                record: { handed.append("record \($0) \($1)") },
                operation: { operation in
                    let key = LogScanner.makeKey(operation.key)
                    let described: LogOperation =
                        if let value = operation.value {
                            .put(key: key, value: Data(value), kind: operation.kind)
                        } else {
                            .remove(key: key)
                        }
                    handed.append("\(described)")
                })
        }
        #expect(result.stop == .end && result.end == bytes.count, "seed \(seed)")
        #expect(handed == expected, "seed \(seed)")
        #expect(expected.count > commits.count, "seed \(seed)")
    }
}
