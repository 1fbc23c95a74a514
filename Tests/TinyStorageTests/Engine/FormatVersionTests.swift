import Foundation
import Testing

@testable import TinyStorage

/// Format version 2 byte for byte, and version 1 files: read exactly, for as long as they are only
/// read, and rewritten as version 2 by the first commit (issue 9, lead's decision 1).
@Suite struct FormatVersionTests {
    struct Profile: Codable, Equatable, Sendable {
        var name: String
        var age: Int
    }

    /// Puts `bytes` in place as the data file of the store "golden" inside `directory`.
    func installDataFile(_ bytes: Data, in directory: URL) throws -> URL {
        let storeDirectory = directory.appendingPathComponent("golden", isDirectory: true)
        try FileManager.default.createDirectory(at: storeDirectory, withIntermediateDirectories: true)
        let file = storeDirectory.appendingPathComponent(StoreLocation.dataFileName)
        try bytes.write(to: file)
        return file
    }

    @Test func aVersion2HeaderIsLaidOutAsSpecified() {
        let bytes = LogHeader(generation: 0x0102, baseSequence: 0x0304).encoded()
        var fixed = LogFormat.magic + [2, 0, 0, 0] + [0, 0, 0, 0]  // magic, version, flags
        fixed += [0x02, 0x01, 0, 0, 0, 0, 0, 0] + [0x04, 0x03, 0, 0, 0, 0, 0, 0]  // generation, base sequence
        fixed += [0, 0, 0, 0]  // reserved
        let crc = fixed.withUnsafeBytes { crc32c($0) }
        let expected = fixed + withUnsafeBytes(of: crc.littleEndian) { Array($0) } + Array(repeating: 0, count: 24)
        #expect(bytes == expected)
        #expect(bytes.count == 64)
    }

    @Test func aVersion2RecordIsLaidOutAsSpecified() {
        let commit = LogCommit(
            writeID: "wé", sequence: 0x0A0B,
            operations: [
                .put(key: "k", value: Data("1".utf8), kind: .json),
                .put(key: "d", value: Data([0xFF]), kind: .data),
                .put(key: "o", value: Data("2".utf8), kind: .original),
                .remove(key: "r"),
            ])
        var payload: [UInt8] = [2, 4]  // kind 2; flags: has writeID
        payload += [0x0B, 0x0A, 0, 0, 0, 0, 0, 0]  // sequence
        payload += [3, 0] + Array("wé".utf8)  // writeID length (UTF-8 bytes) and text
        payload += [4, 0, 0, 0]  // count
        payload += [1, 1, 0, 0, 0] + Array("k".utf8) + [1, 0, 0, 0] + Array("1".utf8)  // put JSON
        payload += [3, 1, 0, 0, 0] + Array("d".utf8) + [1, 0, 0, 0, 0xFF]  // put Data
        payload += [4, 1, 0, 0, 0] + Array("o".utf8) + [1, 0, 0, 0] + Array("2".utf8)  // put original
        payload += [2, 1, 0, 0, 0] + Array("r".utf8)  // remove
        let length = withUnsafeBytes(of: UInt32(payload.count).littleEndian) { Array($0) }
        let crc = (length + payload).withUnsafeBytes { crc32c($0) }
        let expected = length + withUnsafeBytes(of: crc.littleEndian) { Array($0) } + payload
        #expect(commit.encoded() == expected)
        var appended: [UInt8] = []
        commit.encode(into: &appended)
        #expect(appended == expected)
    }

    @Test(arguments: [
        (offset: 1, byte: UInt8(2), why: "the old writeID flag"),
        (offset: 1, byte: UInt8(8), why: "an unknown flag"),
        (offset: 14, byte: UInt8(5), why: "an unknown tag"),
        (offset: 0, byte: UInt8(3), why: "an unknown kind"),
    ])
    func aVerifiedVersion2RecordWithUnknownFlagsTagsOrKindIsMalformed(offset: Int, byte: UInt8, why: String) {
        var payload = Array(LogCommit(operations: [.put(key: "k", value: Data("1".utf8))]).encoded().dropFirst(8))
        payload[offset] = byte
        let length = withUnsafeBytes(of: UInt32(payload.count).littleEndian) { Array($0) }
        let crc = (length + payload).withUnsafeBytes { crc32c($0) }
        let record = length + withUnsafeBytes(of: crc.littleEndian) { Array($0) } + payload
        let scanned = record.withUnsafeBytes { LogScanner.scan($0, from: 0) { _ in } }
        #expect(scanned.stop == .corrupt(offset: 0, reason: "a malformed record"), "\(why)")
    }

    @Test func aVersion2FileDoesNotAcceptVersion1RecordsNorTheReverse() {
        let version2 = LogCommit(operations: [.put(key: "k", value: Data("1".utf8))]).encoded()
        let scanned = version2.withUnsafeBytes { LogScanner.scan($0, from: 0, version: 1) { _ in } }
        #expect(scanned.stop == .corrupt(offset: 0, reason: "a malformed record"))
        let version1 = Array(GoldenFiles.version1.dropFirst(LogFormat.minimumHeaderSize))
        let scanned1 = version1.withUnsafeBytes { LogScanner.scan($0, from: 0, version: 2) { _ in } }
        #expect(scanned1.stop == .corrupt(offset: 0, reason: "a malformed record"))
    }

    @Test func theGoldenVersion1FileScansToItsCommitsWithWriteIDsAsUUIDStrings() throws {
        let bytes = [UInt8](GoldenFiles.version1)
        let header = try bytes.withUnsafeBytes { try LogHeader.decode($0).get() }
        #expect(header == LogHeader(version: 1, generation: 1))
        var commits: [LogCommit] = []
        let scanned = bytes.withUnsafeBytes {
            LogScanner.scan($0, from: header.size, version: header.version) { commits.append($0) }
        }
        #expect(scanned.stop == .end)
        #expect(scanned.end == bytes.count)
        #expect(commits.map(\.writeID) == GoldenFiles.version1WriteIDs)
        #expect(commits.allSatisfy { $0.sequence == 0 })
        let kinds = commits.flatMap(\.operations).compactMap { operation -> ValueKind? in
            if case .put(_, _, let kind, _) = operation { return kind }
            return nil
        }
        #expect(kinds.count == 8)
        #expect(kinds.allSatisfy { $0 == .original })
    }

    @Test func theGoldenVersion1FileOpensAndReadsExactlyAndIsNotRewrittenByReading() throws {
        try withTemporaryDirectory { directory throws in
            let file = try installDataFile(GoldenFiles.version1, in: directory)
            let storage = openStore(directory, name: "golden")
            #expect(storage.availability.isAvailable)
            #expect(Set(storage.allKeys.map(\.rawValue)) == ["streak", "name", "blob", "profile", "日本語 🔑", "flags"])
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 365)
            #expect(try storage.retrieveOrThrow(type: String.self, forKey: "name") == "Ada")
            // Version 1 stored Data as a JSON base64 string: it reads back as the same bytes.
            #expect(try storage.retrieveOrThrow(type: Data.self, forKey: "blob") == Data([0, 1, 2, 0xFF]))
            #expect(
                try storage.retrieveOrThrow(type: Profile.self, forKey: "profile") == Profile(name: "Grace", age: 85))
            #expect(try storage.retrieveOrThrow(type: String.self, forKey: "日本語 🔑") == "é")
            #expect(try storage.retrieveOrThrow(type: [Bool].self, forKey: "flags") == [true, false])
            #expect(try storage.retrieveOrThrow(type: String.self, forKey: "gone") == nil)
            #expect(storage.recoveryReports.isEmpty)
            #expect(try Data(contentsOf: file) == GoldenFiles.version1)
        }
    }

    @Test func theFirstCommitToAVersion1FileRewritesItAsVersion2KeepingEveryValueAndItsKind() throws {
        try withTemporaryDirectory { directory throws in
            let file = try installDataFile(GoldenFiles.version1, in: directory)
            let storage = openStore(directory, name: "golden")
            let before = try storage.rawEntries()
            try storage.storeOrThrow(Data([9, 8]), forKey: "new", writeID: "upgrade")

            let bytes = [UInt8](try Data(contentsOf: file))
            let header = try bytes.withUnsafeBytes { try LogHeader.decode($0).get() }
            #expect(header.version == 2)
            #expect(header.generation > 1)
            var commits: [LogCommit] = []
            let scanned = bytes.withUnsafeBytes {
                LogScanner.scan($0, from: header.size, version: 2) { commits.append($0) }
            }
            #expect(scanned.stop == .end)
            // One record per live key, then the commit, numbered one after another.
            #expect(commits.count == 7)
            #expect(commits.map(\.sequence) == Array(header.baseSequence + 1...header.baseSequence + 7))
            #expect(commits.last?.writeID == "upgrade")

            var expected = before
            expected["new"] = StoredValue(Data([9, 8]), kind: .data)
            #expect(try storage.rawEntries() == expected)
            let reopened = openStore(directory, name: "golden")
            #expect(try reopened.rawEntries() == expected)
            #expect(try reopened.retrieveOrThrow(type: Data.self, forKey: "blob") == Data([0, 1, 2, 0xFF]))
            #expect(try reopened.retrieveOrThrow(type: Data.self, forKey: "new") == Data([9, 8]))
        }
    }

    @Test func recordsCarryConsecutiveSequencesAcrossCommitsCompactionsAndReopening() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            for value in 0..<5 { try storage.storeOrThrow(value, forKey: "k\(value % 2)") }
            func sequences() throws -> (base: UInt64, records: [UInt64]) {
                let bytes = [UInt8](try Data(contentsOf: storage.fileURL))
                let header = try bytes.withUnsafeBytes { try LogHeader.decode($0).get() }
                var records: [UInt64] = []
                _ = bytes.withUnsafeBytes { LogScanner.scan($0, from: header.size) { records.append($0.sequence) } }
                return (header.baseSequence, records)
            }
            #expect(try sequences().base == 0)
            #expect(try sequences().records == [1, 2, 3, 4, 5])

            try storage.compactNow()
            let compacted = try sequences()
            #expect(compacted.base == 5)
            #expect(compacted.records == [6, 7])

            try openStore(directory).storeOrThrow(9, forKey: "k0")
            try storage.storeOrThrow(10, forKey: "k1")
            #expect(try sequences().records == [6, 7, 8, 9])
        }
    }
}
