import Foundation
import Testing

@testable import TinyStorage

/// The header and record encodings round-trip, and damaged bytes are recognized as such.
@Suite struct LogFormatTests {
    @Test(arguments: [1 as UInt64, 2, 1_000, UInt64.max])
    func headerRoundTrips(generation: UInt64) throws {
        let bytes = LogHeader(generation: generation).encoded()
        #expect(bytes.count == LogFormat.headerSize)
        #expect(Array(bytes.prefix(8)) == LogFormat.magic)
        let decoded = try bytes.withUnsafeBytes { try LogHeader.decode($0).get() }
        #expect(decoded == LogHeader(generation: generation))
        #expect(decoded.version == LogFormat.version)
    }

    @Test func damagedHeadersAreRecognized() {
        let header = LogHeader(generation: 7, baseSequence: 41).encoded()
        func decode(_ bytes: [UInt8]) -> Result<LogHeader, LogHeader.Problem> {
            bytes.withUnsafeBytes { LogHeader.decode($0) }
        }
        #expect(decode(Array(header.prefix(63))) == .failure(.truncated))
        #expect(decode(Array(header.prefix(31))) == .failure(.truncated))
        #expect(decode([]) == .failure(.truncated))
        #expect(decode(Array("{\"a\": 1, \"some\": \"json file with more text\"}".utf8)) == .failure(.notAStoreFile))
        // Every byte the checksum covers, the version field included: damage, never a newer version.
        for index in 8..<40 {
            var damaged = header
            damaged[index] ^= 0x10
            #expect(decode(damaged) == .failure(.damaged), "byte \(index)")
        }
        // The durable-mark slots are outside the checksum: they are updated in place.
        for index in 40..<LogFormat.headerSize {
            var changed = header
            changed[index] ^= 0x10
            #expect(decode(changed) == .success(LogHeader(generation: 7, baseSequence: 41)), "byte \(index)")
        }
        let newer = LogHeader(version: LogFormat.newestVersion + 1, generation: 1).encoded()
        #expect(decode(newer) == .failure(.newerVersion(LogFormat.newestVersion + 1)))
        // Bytes after the header do not matter to the header.
        #expect(decode(header + [1, 2, 3]) == .success(LogHeader(generation: 7, baseSequence: 41)))
    }

    @Test func aVersion1HeaderStillDecodesAndDamageToItIsRecognized() {
        let header = LogHeader(version: 1, generation: 9).encoded()
        #expect(header.count == LogFormat.minimumHeaderSize)
        #expect(header.withUnsafeBytes { LogHeader.decode($0) } == .success(LogHeader(version: 1, generation: 9)))
        // As in a file: records follow the header.
        let file = header + [UInt8](repeating: 0xAB, count: 48)
        for index in 8..<LogFormat.minimumHeaderSize {
            var damaged = file
            damaged[index] ^= 0x10
            #expect(damaged.withUnsafeBytes { LogHeader.decode($0) } == .failure(.damaged), "byte \(index)")
        }
    }

    static let commits: [LogCommit] = [
        LogCommit(operations: [.put(key: "a", value: Data("1".utf8))]),
        LogCommit(operations: [.remove(key: "a")]),
        LogCommit(operations: []),
        LogCommit(clearsFirst: true, writeID: nil, operations: []),
        LogCommit(clearsFirst: true, writeID: UUID().uuidString, operations: [.put(key: "after clear", value: Data())]),
        LogCommit(
            writeID: UUID().uuidString,
            operations: [
                .put(key: "日本語 🔑", value: Data("\"é\"".utf8)), .remove(key: "gone"),
                .put(key: String(repeating: "k", count: 1024), value: Data(repeating: 0xAB, count: 70_000)),
            ]),
        // Format 2: a sequence, writeIDs of any text up to the limit, and the three kinds of value.
        LogCommit(
            writeID: "sync-42", sequence: 7,
            operations: [
                .put(key: "blob", value: Data([0, 0xFF, 0x22]), kind: .data),
                .put(key: "adopted", value: Data("[true]".utf8), kind: .original),
            ]),
        LogCommit(
            writeID: "", sequence: UInt64.max, operations: [.put(key: "json", value: Data("1".utf8), kind: .json)]),
        LogCommit(writeID: String(repeating: "é", count: 512), operations: [.remove(key: "k")]),
        // Format 3: puts that expire, of each kind, beside ones that do not, at the extremes of a deadline.
        LogCommit(
            writeID: "expiring", sequence: 9,
            operations: [
                .put(key: "soon", value: Data("1".utf8), deadline: Deadline(milliseconds: 1)),
                .put(
                    key: "bytes", value: Data([0, 5]), kind: .data, deadline: Deadline(milliseconds: 1_735_689_600_000)),
                .put(key: "late", value: Data("x".utf8), kind: .original, deadline: Deadline(milliseconds: .max)),
                .put(key: "never", value: Data("2".utf8)), .remove(key: "soon"),
            ]),
    ]

    @Test(arguments: commits)
    func commitRoundTripsThroughTheScanner(commit: LogCommit) {
        let bytes = commit.encoded()
        var expectedSize = LogFormat.frameSize + 2 + 8 + 4 + (commit.writeID.map { 2 + $0.utf8.count } ?? 0)
        for operation in commit.operations {
            switch operation {
            case .put(let key, let value, _, let deadline):
                expectedSize += 1 + 4 + key.utf8.count + 4 + value.count + (deadline == nil ? 0 : 8 + 1)
            case .remove(let key): expectedSize += 1 + 4 + key.utf8.count
            }
        }
        #expect(bytes.count == expectedSize)
        var decoded: [LogCommit] = []
        let scanned = bytes.withUnsafeBytes { LogScanner.scan($0, from: 0) { decoded.append($0) } }
        #expect(scanned.stop == .end)
        #expect(scanned.end == bytes.count)
        #expect(decoded == [commit])
    }

    @Test func aPutRecordHasTheSizeCompactionAccountsFor() {
        let commit = LogCommit(operations: [.put(key: "key", value: Data("12345".utf8))])
        #expect(commit.encoded().count == LogCommit.putRecordSize(keyLength: 3, valueLength: 5))
        let expiring = LogCommit(operations: [
            .put(key: "key", value: Data("12345".utf8), deadline: Deadline(milliseconds: 9))
        ])
        #expect(expiring.encoded().count == LogCommit.putRecordSize(keyLength: 3, valueLength: 5, expires: true))
    }

    /// Records encoded one after another into one buffer (a compaction's file, the commits it
    /// copies) grow it geometrically: a buffer reallocated for every record made a compaction of
    /// many records take time quadratic in their number.
    @Test func encodingManyRecordsIntoOneBufferGrowsItGeometrically() {
        var bytes: [UInt8] = []
        var reallocations = 0
        for index in 0..<10_000 {
            let capacity = bytes.capacity
            LogCommit(sequence: UInt64(index + 1), operations: [.put(key: "k\(index)", value: Data("\(index)".utf8))])
                .encode(into: &bytes)
            if bytes.capacity != capacity { reallocations += 1 }
        }
        #expect(bytes.count > 300_000)
        #expect(reallocations < 40, "\(reallocations) reallocations for 10,000 records")
    }

    @Test func recordsAreLittleEndianAndChecksummedOverLengthAndPayload() {
        let bytes = LogCommit(operations: [.put(key: "k", value: Data("1".utf8))]).encoded()
        let length = UInt32(bytes.count - LogFormat.frameSize)
        #expect(Array(bytes[0..<4]) == [UInt8(length & 0xFF), UInt8(length >> 8 & 0xFF), 0, 0])
        let stored = bytes[4..<8].enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (8 * $1.offset) }
        let covered = Array(bytes[0..<4]) + Array(bytes[8...])
        #expect(covered.withUnsafeBytes { crc32c($0) } == stored)
    }

    @Test(arguments: [LogFormatTests.putThenClear, LogFormatTests.overlappingBulk])
    func applyingCommitsGivesTheLastValuePerKey(scenario: [LogCommit]) {
        var state = EngineState()
        let engine = Engine(
            location: StoreLocation(insideDirectory: URL(fileURLWithPath: "/nonexistent"), name: "x"),
            nameError: TinyStorageError(.invalidName, "test engine"), durability: .standard, io: .system,
            logger: TestLogger())
        var model: [String: Data] = [:]
        for commit in scenario {
            engine.apply(commit, to: &state, isExternal: false)
            if commit.clearsFirst { model.removeAll() }
            for operation in commit.operations {
                switch operation {
                case .put(let key, let value, _, _): model[key] = value
                case .remove(let key): model[key] = nil
                }
            }
        }
        #expect(state.index.entries.mapValues(\.bytes.data) == model)
        let expectedLive = model.reduce(LogFormat.headerSize) {
            $0 + LogCommit.putRecordSize(keyLength: $1.key.utf8.count, valueLength: $1.value.count)
        }
        #expect(state.index.liveBytes == expectedLive)
    }

    static let putThenClear: [LogCommit] = [
        LogCommit(operations: [.put(key: "a", value: Data("1".utf8)), .put(key: "b", value: Data("22".utf8))]),
        LogCommit(clearsFirst: true, operations: [.put(key: "c", value: Data("333".utf8))]),
        LogCommit(operations: [.put(key: "c", value: Data("4".utf8))]),
    ]
    static let overlappingBulk: [LogCommit] = [
        LogCommit(operations: [.put(key: "a", value: Data("1".utf8)), .put(key: "a", value: Data("22".utf8))]),
        LogCommit(operations: [.remove(key: "a"), .put(key: "b", value: Data("x".utf8)), .remove(key: "nope")]),
    ]
}
