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
            // NB: a cut inside a record's first bytes that are all zeros (a length of 256 begins
            // with a zero byte) reads as zero fill, a clean end: no scanner can tell them apart.
            let cut = bytes[boundaries[complete]..<length]
            let expectedStop: LogScanner.Stop =
                cut.allSatisfy { $0 == 0 } ? .end : .incomplete(offset: boundaries[complete])
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
        let result = scan(Self.framed(payload))
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

    /// A compaction copies the commits made during its rewrite renumbered in place
    /// (``LogScanner/renumberedCopy(of:version:after:)``): the bytes must be exactly those that decoding
    /// each commit and encoding it again with its new number gives, as compactions did before,
    /// for every kind of record (puts of each value kind, removals, writeIDs, clears, empty
    /// commits), and zero fill after the last record is left out as that scan leaves it out.
    @Test func aRenumberedCopyIsWhatEncodingEachCommitAgainGives() {
        let seed = SeededGenerator.makeSeed()
        var generator = SeededGenerator(seed: seed)
        var commits = Self.randomCommits(300, using: &generator)
        let kinds: [ValueKind] = [.json, .data, .original]
        for index in commits.indices {
            commits[index].sequence = 7_000 + UInt64(index)
            let operations = commits[index].operations
            commits[index].operations = []
            for position in operations.indices {
                var operation = operations[position]
                if case .put(let key, let value, _, _) = operation {
                    operation = .put(key: key, value: value, kind: kinds[position % 3])
                }
                commits[index].operations.append(operation)
            }
        }
        let bytes = commits.flatMap { $0.encoded() }
        var expected: [UInt8] = []
        var expectedSequence: UInt64 = 41
        _ = bytes.withUnsafeBytes {
            LogScanner.scan($0, from: 0) { commit in
                var commit = commit
                expectedSequence += 1
                commit.sequence = expectedSequence
                commit.encode(into: &expected)
            }
        }
        for padding in [0, 4_096] {
            var sequence: UInt64 = 41
            let copy = (bytes + [UInt8](repeating: 0, count: padding)).withUnsafeBytes {
                LogScanner.renumberedCopy(of: $0, version: LogFormat.version, after: &sequence)
            }
            // NB: compared as a whole, reported by the first byte that differs (not both arrays).
            let difference = copy.map { copy in
                (0..<max(copy.count, expected.count)).first { copy.get($0) != expected.get($0) }
            }
            #expect(difference == .some(nil), "seed \(seed): copies differ from byte \(String(describing: difference))")
            #expect(sequence == 41 + UInt64(commits.count) && sequence == expectedSequence)
        }
        var sequence: UInt64 = 9
        #expect(
            [UInt8]().withUnsafeBytes {
                LogScanner.renumberedCopy(of: $0, version: LogFormat.version, after: &sequence)
            } == [])
        #expect(sequence == 9)
    }

    /// A tail that does not verify is never copied: every single-byte flip, every truncation
    /// inside a record, and a version 1 record (which a compaction encodes again instead) give
    /// `nil`, with the sequence number left as it was.
    @Test func aRenumberedCopyRefusesWhatDoesNotVerify() {
        var generator = SeededGenerator(seed: 12)
        let bytes = Self.randomCommits(12, using: &generator).flatMap { $0.encoded() }
        func copy(_ bytes: [UInt8]) -> [UInt8]? {
            var sequence: UInt64 = 5
            let copy = bytes.withUnsafeBytes {
                LogScanner.renumberedCopy(of: $0, version: LogFormat.version, after: &sequence)
            }
            if copy == nil { #expect(sequence == 5) }
            return copy
        }
        #expect(copy(bytes) != nil)
        for offset in bytes.indices {
            var damaged = bytes
            damaged[offset] ^= 0x40
            #expect(copy(damaged) == nil, "a flip at \(offset) was copied")
        }
        let ends = Set(LogScannerTests.recordEnds(bytes))
        for length in 1..<bytes.count where !ends.contains(length) {
            #expect(copy(Array(bytes.prefix(length))) == nil, "a record cut at \(length) was copied")
        }
        var version1: [UInt8] = [LogFormat.version1CommitKind, 0]
        version1.appendLittleEndian(UInt32(0))
        #expect(copy(Self.framed(version1)) == nil)
    }

    /// `payload` as a record: its length, its checksum, then itself.
    static func framed(_ payload: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.appendLittleEndian(UInt32(payload.count))
        let lengthCRC = bytes.withUnsafeBytes { crc32c($0) }
        bytes.appendLittleEndian(payload.withUnsafeBytes { crc32c($0, startingWith: lengthCRC) })
        return bytes + payload
    }

    /// Where each record of `bytes` ends, from its frames.
    static func recordEnds(_ bytes: [UInt8]) -> [Int] {
        var ends: [Int] = []
        var position = 0
        while position + LogFormat.frameSize <= bytes.count {
            let length = Int(bytes.withUnsafeBytes { $0.loadLittleEndian(UInt32.self, at: position) })
            position += LogFormat.frameSize + length
            ends.append(position)
        }
        return ends
    }
}

private extension Array where Element == UInt8 {
    /// The byte at `index`, or `nil` past the end.
    func get(_ index: Int) -> UInt8? { indices.contains(index) ? self[index] : nil }
}
