import Foundation
import Testing

@testable import TinyStorage

/// Format version 3 (issue 33, item 3): a put with a deadline byte for byte, files that take
/// version 3 only once they hold one (and the upgrade from version 2, then), readers of version 2
/// refusing version 3 cleanly, and compaction removing expired values from the file.
@Suite struct ExpiryFormatTests {
    /// 2025-01-01 00:00 UTC plus a little, in milliseconds: 0x0000_0194_1F2A_xxxx.
    static let deadline = Deadline(milliseconds: 1_735_689_600_123)!

    /// Puts `bytes` in place as the data file of the store "golden" inside `directory`.
    func installDataFile(_ bytes: Data, in directory: URL) throws -> URL {
        let storeDirectory = directory.appendingPathComponent("golden", isDirectory: true)
        try FileManager.default.createDirectory(at: storeDirectory, withIntermediateDirectories: true)
        let file = storeDirectory.appendingPathComponent(StoreLocation.dataFileName)
        try bytes.write(to: file)
        return file
    }

    func header(of url: URL) throws -> LogHeader {
        let bytes = [UInt8](try Data(contentsOf: url))
        return try bytes.withUnsafeBytes { try LogHeader.decode($0).get() }
    }

    /// The commits of the data file at `url`, scanned as its header's version says.
    func commits(of url: URL) throws -> (stop: LogScanner.Stop, commits: [LogCommit]) {
        let bytes = [UInt8](try Data(contentsOf: url))
        let header = try bytes.withUnsafeBytes { try LogHeader.decode($0).get() }
        var commits: [LogCommit] = []
        let scanned = bytes.withUnsafeBytes {
            LogScanner.scan($0, from: header.size, version: header.version) { commits.append($0) }
        }
        return (scanned.stop, commits)
    }

    @Test func anExpiringPutIsLaidOutAsSpecified() {
        let commit = LogCommit(
            sequence: 3,
            operations: [
                .put(key: "k", value: Data("1".utf8), kind: .json, deadline: Self.deadline),
                .put(key: "d", value: Data([0xFF]), kind: .data, deadline: Self.deadline),
                .put(key: "p", value: Data("2".utf8)),
            ])
        let deadline = withUnsafeBytes(of: Self.deadline.milliseconds.littleEndian) { Array($0) }
        var payload: [UInt8] = [2, 0]  // kind 2, as in version 2; no flags
        payload += [3, 0, 0, 0, 0, 0, 0, 0] + [3, 0, 0, 0]  // sequence, count
        payload += [5, 1, 0, 0, 0] + Array("k".utf8) + deadline + [1] + [1, 0, 0, 0] + Array("1".utf8)
        payload += [5, 1, 0, 0, 0] + Array("d".utf8) + deadline + [3] + [1, 0, 0, 0, 0xFF]
        payload += [1, 1, 0, 0, 0] + Array("p".utf8) + [1, 0, 0, 0] + Array("2".utf8)  // never expires: as in v2
        let length = withUnsafeBytes(of: UInt32(payload.count).littleEndian) { Array($0) }
        let crc = (length + payload).withUnsafeBytes { crc32c($0) }
        let expected = length + withUnsafeBytes(of: crc.littleEndian) { Array($0) } + payload
        #expect(commit.encoded() == expected)
        #expect(commit.encodedSize == expected.count)
        #expect(commit.requiredVersion == 3)
        #expect(LogCommit(operations: [.put(key: "p", value: Data())]).requiredVersion == 2)
        let single = SingleKeyRecord(
            key: "k", value: StoredValue(Data("1".utf8), kind: .json, deadline: Self.deadline), writeID: nil,
            sequence: 3)
        #expect(single.encoded() == LogCommit(sequence: 3, operations: [commit.operations[0]]).encoded())

        var scanned: [LogCommit] = []
        let stop = expected.withUnsafeBytes { LogScanner.scan($0, from: 0, version: 3) { scanned.append($0) } }.stop
        #expect(stop == .end)
        #expect(scanned == [commit])
    }

    /// Re-checksummed `record` with `payload[offset...]` replaced by `bytes`.
    static func patched(_ record: [UInt8], at offset: Int, with bytes: [UInt8]) -> [UInt8] {
        var payload = Array(record.dropFirst(LogFormat.frameSize))
        payload.replaceSubrange(offset..<offset + bytes.count, with: bytes)
        let length = withUnsafeBytes(of: UInt32(payload.count).littleEndian) { Array($0) }
        let crc = (length + payload).withUnsafeBytes { crc32c($0) }
        return length + withUnsafeBytes(of: crc.littleEndian) { Array($0) } + payload
    }

    @Test func anExpiringPutIsMalformedInAVersion2FileOrWithAZeroDeadlineOrAnUnknownValueTag() {
        let record = LogCommit(operations: [.put(key: "k", value: Data("1".utf8), deadline: Self.deadline)]).encoded()
        func stop(_ bytes: [UInt8], version: UInt32?) -> LogScanner.Stop {
            bytes.withUnsafeBytes { LogScanner.scan($0, from: 0, version: version) { _ in } }.stop
        }
        let malformed = LogScanner.Stop.corrupt(offset: 0, reason: "a malformed record")
        #expect(stop(record, version: 3) == .end)
        #expect(stop(record, version: nil) == .end, "salvage reads every known version")
        #expect(stop(record, version: 2) == malformed, "a version 2 file never holds one")
        #expect(stop(record, version: 1) == malformed)
        // The payload: kind, flags, sequence (8), count (4), then tag 5, key length (4), "k", deadline.
        let deadlineOffset = 2 + 8 + 4 + 1 + 4 + 1
        #expect(
            stop(Self.patched(record, at: deadlineOffset, with: Array(repeating: 0, count: 8)), version: 3) == malformed
        )
        for tag: UInt8 in [0, 2, 5, 6] {
            #expect(
                stop(Self.patched(record, at: deadlineOffset + 8, with: [tag]), version: 3) == malformed, "tag \(tag)")
        }
        #expect(stop(Self.patched(record, at: deadlineOffset + 8, with: [4]), version: 3) == .end)
    }

    @Test func aVersion3FileIsRefusedAsNewerNeverAsDamageByAReaderOfVersion2() throws {
        let header = LogHeader(version: 3, generation: 5, baseSequence: 9).encoded()
        #expect(header.count == LogFormat.headerSize)
        var asVersion2 = LogHeader(version: 2, generation: 5, baseSequence: 9).encoded()
        asVersion2[8] = 3
        #expect(Array(header[0..<8]) + Array(header[12..<36]) == Array(asVersion2[0..<8]) + Array(asVersion2[12..<36]))
        #expect(
            header.withUnsafeBytes { LogHeader.decode($0) }
                == .success(LogHeader(version: 3, generation: 5, baseSequence: 9)))
        // What the release before this one does with it: the same check, 2 being the newest it reads.
        #expect(header.withUnsafeBytes { LogHeader.decode($0, newestReadable: 2) } == .failure(.newerVersion(3)))
        // Damage to a version 3 header is damage, for either reader.
        var damaged = header
        damaged[20] ^= 1
        #expect(damaged.withUnsafeBytes { LogHeader.decode($0, newestReadable: 2) } == .failure(.damaged))

        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow("v", forKey: "k", expiresAfter: .seconds(3600))
            let bytes = [UInt8](try Data(contentsOf: storage.fileURL))
            #expect(bytes.withUnsafeBytes { LogHeader.decode($0, newestReadable: 2) } == .failure(.newerVersion(3)))
            // And that release's store: unavailable with `unsupportedFormat`, the file untouched.
            let error = Engine.newerFormat(3, path: storage.fileURL.path)
            #expect(error.code == .unsupportedFormat)
        }
    }

    @Test func aStoreThatNeverStoresAnExpiringValueStaysVersion2() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow(1, forKey: "a")
            try storage.bulkStoreOrThrow(items: ["b": 2, "c": "3"])
            try storage.update("a", as: Int.self) { $0 = ($0 ?? 0) + 1 }
            storage.incrementInteger(forKey: "n")
            try storage.compactNow()
            try storage.storeOrThrow(Data([1]), forKey: "d")
            #expect(try header(of: storage.fileURL).version == 2)
            #expect(try commits(of: storage.fileURL).stop == .end)
        }
    }

    @Test func theGoldenVersion2FileOpensAndReadsExactlyAndIsNotRewrittenByReading() throws {
        try withTemporaryDirectory { directory throws in
            let file = try installDataFile(GoldenFiles.version2, in: directory)
            let storage = openStore(directory, name: "golden")
            #expect(storage.availability.isAvailable)
            #expect(Set(storage.allKeys.map(\.rawValue)) == ["streak", "name", "blob", "profile", "日本語 🔑"])
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 365)
            #expect(try storage.retrieveOrThrow(type: String.self, forKey: "name") == "Ada")
            #expect(try storage.retrieveOrThrow(type: Data.self, forKey: "blob") == Data([0, 1, 2, 0xFF]))
            #expect(try storage.rawValue(forKey: "blob")?.kind == .data)
            #expect(try storage.retrieveOrThrow(type: String.self, forKey: "日本語 🔑") == "é")
            #expect(try storage.retrieveOrThrow(type: String.self, forKey: "gone") == nil)
            #expect(try storage.expiration(forKey: "streak") == nil)
            #expect(storage.recoveryReports.isEmpty)
            try storage.synchronize()
            #expect(try Data(contentsOf: file) == GoldenFiles.version2)
        }
    }

    @Test func theFirstExpiringWriteRewritesAVersion2FileAsVersion3AndNotBefore() throws {
        try withTemporaryDirectory { directory throws in
            let clock = ManualClock()
            let file = try installDataFile(GoldenFiles.version2, in: directory)
            let storage = openStore(directory, name: "golden", options: clock.options())
            let other = openStore(directory, name: "golden", options: clock.options())
            try storage.storeOrThrow("plain", forKey: "before")
            let version2 = try header(of: file)
            #expect(version2.version == 2, "a write that does not expire appends to the version 2 file")
            #expect(version2.generation == 1)
            let before = try storage.rawEntries()

            try storage.storeOrThrow("secret", forKey: "token", writeID: "upgrade", expiresAfter: .seconds(60))
            let upgraded = try header(of: file)
            #expect(upgraded.version == 3)
            #expect(upgraded.generation == 2, "rewritten (a compaction), then appended to")
            let (stop, records) = try commits(of: file)
            #expect(stop == .end)
            // One record per key, then the expiring commit.
            #expect(records.count == before.count + 1)
            #expect(records.last?.writeID == "upgrade")
            #expect(
                records.last?.operations == [
                    .put(
                        key: "token", value: Data("\"secret\"".utf8), kind: .json,
                        deadline: Deadline(milliseconds: clock.now + 60_000))
                ])

            var expected = before
            expected["token"] = StoredValue(
                Data("\"secret\"".utf8), kind: .json, deadline: Deadline(milliseconds: clock.now + 60_000))
            #expect(try storage.rawEntries() == expected)
            #expect(try other.rawEntries() == expected, "another instance reads the upgraded file")
            #expect(try openStore(directory, name: "golden", options: clock.options()).rawEntries() == expected)

            try storage.storeOrThrow("later", forKey: "token2", expiresAfter: .seconds(60))
            #expect(try header(of: file).generation == 2, "appended: the file is version 3 already")
        }
    }

    @Test func aVersion1FileIsRewrittenAsVersion3ByAnExpiringWrite() throws {
        try withTemporaryDirectory { directory throws in
            let file = try installDataFile(GoldenFiles.version1, in: directory)
            let storage = openStore(directory, name: "golden")
            let before = try storage.rawEntries()
            try storage.storeOrThrow(1, forKey: "soon", expiresAfter: .seconds(60))
            #expect(try header(of: file).version == 3)
            #expect(try commits(of: file).stop == .end)
            let after = try openStore(directory, name: "golden").rawEntries()
            #expect(after.filter { $0.key != "soon" } == before, "every value kept, with its kind")
            #expect(after["soon"]?.deadline != nil)
        }
    }

    @Test func compactionRemovesExpiredValuesFromTheFileAndKeepsTheOthersWithTheirDeadlines() throws {
        try withTemporaryDirectory { directory throws in
            let clock = ManualClock()
            let storage = openStore(directory, options: clock.options())
            let secret = "expired-secret-\(UUID().uuidString)"
            try storage.storeOrThrow(secret, forKey: "secret", expiresAfter: .seconds(10))
            try storage.storeOrThrow("later", forKey: "later", expiresAfter: .seconds(100))
            try storage.storeOrThrow("kept", forKey: "kept")
            let laterDeadline = try storage.expiration(forKey: "later")

            try storage.compactNow()
            #expect(String(decoding: try Data(contentsOf: storage.fileURL), as: UTF8.self).contains(secret))
            #expect(try storage.expiration(forKey: "secret") != nil, "not yet expired: kept with its deadline")

            clock.advance(by: 10_000)
            #expect(String(decoding: try Data(contentsOf: storage.fileURL), as: UTF8.self).contains(secret))
            try storage.compactNow()
            #expect(!String(decoding: try Data(contentsOf: storage.fileURL), as: UTF8.self).contains(secret))
            let (stop, records) = try commits(of: storage.fileURL)
            #expect(stop == .end)
            #expect(Set(records.flatMap(\.operations).map(\.key)) == ["later", "kept"])
            #expect(try header(of: storage.fileURL).version == 3)
            #expect(try header(of: storage.fileURL).snapshotRecords == 2)

            let reopened = openStore(directory, options: clock.options())
            #expect(try reopened.expiration(forKey: "later") == laterDeadline)
            #expect(try reopened.rawEntries().keys.sorted() == ["kept", "later"])
            #expect(try storage.statistics.keyCount == 2)
            try storage.storeOrThrow("next", forKey: "next")
            #expect(
                try openStore(directory, options: clock.options()).rawEntries().keys.sorted() == [
                    "kept", "later", "next",
                ])
        }
    }
}
