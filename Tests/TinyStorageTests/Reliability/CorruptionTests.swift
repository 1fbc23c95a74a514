import Foundation
import Testing

@testable import TinyStorage

/// G3 beyond the cases `RecoveryTests` pins: a garbage header, random files, a cut at every offset
/// of the file (not only inside the last record), impossible lengths, several damaged records,
/// damage found while catching up, and several instances opening one damaged store at once.
@Suite struct CorruptionTests {
    /// A small store of six commits (puts, an overwrite, a removal) and what it held after each.
    struct History {
        var fileURL: URL
        var bytes: Data
        /// `boundaries[k]` is the offset just past the `k`-th record (`boundaries[0]` is the header).
        var boundaries: [Int]
        /// `models[k]` is every key's stored JSON after the first `k` records.
        var models: [[String: Data]]

        /// How many whole records fit in the first `offset` bytes.
        func recordCount(upTo offset: Int) -> Int { boundaries.lastIndex { $0 <= offset } ?? 0 }
    }

    /// - Parameter flushed: Whether the history is flushed (its durable mark covers every record),
    ///   so damage anywhere in it is damage to durable data, not the power-loss window.
    func makeHistory(in parent: URL, flushed: Bool = false) throws -> History {
        let storage = openStore(parent, name: "original")
        let steps: [(String, (any Encodable & Sendable)?)] = [
            ("a", 1), ("b", "two"), ("a", 3), ("c", [1, 2]), ("b", nil), ("d", true),
        ]
        var boundaries = [try committedLength(storage.fileURL)]
        var models = [try storage.rawJSON()]
        for (key, value) in steps {
            try storage.storeOrThrow(value, forKey: key)
            boundaries.append(try committedLength(storage.fileURL))
            models.append(try storage.rawJSON())
        }
        if flushed { try storage.synchronize() }
        #expect(boundaries[0] == LogFormat.headerSize)
        // NB: the log only: on Linux the file goes on with space allocated ahead (zeros).
        let log = try Data(contentsOf: storage.fileURL).prefix(boundaries[boundaries.count - 1])
        return History(fileURL: storage.fileURL, bytes: log, boundaries: boundaries, models: models)
    }

    /// Writes `bytes` as the data file of a new store `name` in `parent` and opens it.
    func openDataFile(
        _ bytes: Data, in parent: URL, name: String, logger: TestLogger = TestLogger()
    ) throws
        -> TinyStorage
    {
        let folder = parent.appendingPathComponent(name, isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
        try bytes.write(to: folder.appendingPathComponent("store.tinystorage"))
        return openStore(parent, name: name, logger: logger)
    }

    /// The damaged files a store set aside, as bytes.
    func quarantined(_ storage: TinyStorage) throws -> [Data] {
        try quarantineFiles(of: storage).map { try Data(contentsOf: $0) }
    }

    @Test func aCutAtEveryOffsetOpensWithTheVerifiedPrefixAndNeverResetsSilently() throws {
        try withTemporaryDirectory { parent throws in
            let history = try makeHistory(in: parent)
            for offset in 0..<history.bytes.count {
                let cut = history.bytes.prefix(offset)
                let storage = try openDataFile(cut, in: parent, name: "cut\(offset)")
                let context = "cut at \(offset) of \(history.bytes.count)"
                if offset == 0 {
                    // An empty file is what a crash right after creating the file leaves: nothing
                    // was ever stored in it, so it is a new store.
                    #expect(storage.availability.isAvailable, "\(context)")
                    #expect(try storage.rawJSON().isEmpty, "\(context)")
                } else if offset < LogFormat.headerSize {
                    // Not even a whole header: nothing verifies, so nothing is replaced.
                    #expect(unavailabilityError(storage)?.code == .corrupted, "\(context)")
                    #expect(try Data(contentsOf: storage.fileURL) == cut, "\(context)")
                    #expect(quarantineFiles(of: storage).isEmpty, "\(context)")
                } else {
                    let records = history.recordCount(upTo: offset)
                    let boundary = history.boundaries[records]
                    #expect(storage.availability.isAvailable, "\(context)")
                    #expect(try storage.rawJSON() == history.models[records], "\(context)")
                    #expect(try committedLength(storage.fileURL) == boundary, "\(context)")
                    if offset == boundary {
                        #expect(storage.recoveryReports.isEmpty, "\(context)")
                        #expect(quarantineFiles(of: storage).isEmpty, "\(context)")
                    } else {
                        // Bytes were dropped: reported, and kept byte for byte (but for trailing
                        // zeros, which is what preallocated space holds).
                        var dropped = cut.suffix(from: boundary)
                        while dropped.last == 0 { dropped.removeLast() }
                        let reports = storage.recoveryReports
                        #expect(reports.count == 1, "\(context)")
                        #expect(reports.first?.isInterruptedWrite == true, "\(context)")
                        #expect(
                            reports.first?.damagedRanges == [boundary..<max(dropped.endIndex, boundary + 1)],
                            "\(context)")
                        #expect(try quarantined(storage) == [dropped], "\(context)")
                    }
                    // A second open finds a healthy file.
                    let reopened = openStore(parent, name: "cut\(offset)")
                    #expect(reopened.recoveryReports.isEmpty, "\(context)")
                    #expect(try reopened.rawJSON() == history.models[records], "\(context)")
                }
                try FileManager.default.removeItem(at: storage.directoryURL)
            }
        }
    }

    @Test func aGarbageHeaderBeforeValidRecordsIsSalvagedAndReported() throws {
        let seed = SeededGenerator.makeSeed()
        var generator = SeededGenerator(seed: seed)
        try withTemporaryDirectory { parent throws in
            let history = try makeHistory(in: parent)
            var damaged = history.bytes
            var garbage = Data.random(count: LogFormat.headerSize, using: &generator)
            garbage[0] = 0x42  // never the magic's first byte
            damaged.replaceSubrange(0..<LogFormat.headerSize, with: garbage)

            let logger = TestLogger()
            let storage = try openDataFile(damaged, in: parent, name: "garbage", logger: logger)
            #expect(storage.availability.isAvailable, "seed \(seed)")
            #expect(try storage.rawJSON() == history.models[6], "seed \(seed)")
            let report = try #require(storage.recoveryReports.first, "seed \(seed)")
            #expect(storage.recoveryReports.count == 1)
            #expect(report.error.code == .corrupted)
            #expect(!report.isInterruptedWrite)
            #expect(report.damagedRanges == [0..<LogFormat.headerSize], "seed \(seed)")
            #expect(report.recoveredRecordCount == 6)
            #expect(try quarantined(storage) == [damaged])
            #expect(report.quarantineURL.standardizedFileURL == quarantineFiles(of: storage).first?.standardizedFileURL)
            #expect(logger.texts(atLeast: .error).contains { $0.contains(report.quarantineURL.lastPathComponent) })
            // The rebuilt file has a valid header and verifies on the next open.
            #expect(throws: Never.self) { try headerGeneration(storage.fileURL) }
            #expect(openStore(parent, name: "garbage").recoveryReports.isEmpty)
        }
    }

    @Test func filesOfRandomBytesAreUnavailableCorruptedAndUntouched() throws {
        let seed = SeededGenerator.makeSeed()
        var generator = SeededGenerator(seed: seed)
        try withTemporaryDirectory { parent throws in
            let sizes = [1, 7, 31, 32, 33, 100, 4_096, 65_536]
            var files = sizes.map { Data.random(count: $0, using: &generator) }
            // Ours by its first bytes, garbage after them.
            files.append(Data(LogFormat.magic) + Data.random(count: 500, using: &generator))
            for (index, bytes) in files.enumerated() {
                let context = "seed \(seed), file \(index) (\(bytes.count) bytes)"
                let storage = try openDataFile(bytes, in: parent, name: "random\(index)")
                let reason = unavailabilityError(storage)
                #expect(reason?.code == .corrupted, "\(context): \(String(describing: reason))")
                expectError(.unavailable) { try storage.retrieveOrThrow(type: Int.self, forKey: "streak") }
                expectError(.unavailable) { try storage.storeOrThrow(1, forKey: "streak") }
                storage.reset()
                #expect(try Data(contentsOf: storage.fileURL) == bytes, "\(context)")
                #expect(quarantineFiles(of: storage).isEmpty, "\(context)")
                #expect(storage.recoveryReports.isEmpty, "\(context)")
            }
        }
    }

    /// In durable data, damage is not a power loss: every record that verifies is kept, whatever
    /// comes after the damage, and the loss is reported as such.
    @Test func aHugeLengthInTheMiddleOfDurableDataLosesOnlyThatRecord() throws {
        try withTemporaryDirectory { parent throws in
            let history = try makeHistory(in: parent, flushed: true)
            var damaged = history.bytes
            // Record 3 (`a = 3`, overwriting `a = 1`) claims to be almost 4 GiB long.
            let start = history.boundaries[2]
            damaged.replaceSubrange(start..<start + 4, with: [0xF0, 0xFF, 0xFF, 0xFF])

            let storage = try openDataFile(damaged, in: parent, name: "huge")
            expectDataLossReportedOnce(by: storage)
            #expect(storage.availability.isAvailable)
            var expected = history.models[6]
            expected["a"] = Data("1".utf8)  // the overwrite is lost, nothing else
            #expect(try storage.rawJSON() == expected)
            let report = try #require(storage.recoveryReports.first)
            #expect(!report.isInterruptedWrite)
            #expect(report.isDataLoss)
            #expect(report.damagedRanges == [start..<history.boundaries[3]])
            #expect(report.recoveredRecordCount == 5)
            #expect(try quarantined(storage) == [damaged])
        }
    }

    enum ThrowingRead: CaseIterable { case retrieveOrThrow, typedKey, raw }

    /// The loss is reported by the first throwing read of any kind, even when a non-throwing read
    /// came first and cached the value it asks for (the cached fast path must not skip it).
    @Test(arguments: ThrowingRead.allCases)
    func theFirstThrowingReadReportsTheLossEvenAfterACachedRead(read: ThrowingRead) throws {
        try withTemporaryDirectory { parent throws in
            let history = try makeHistory(in: parent, flushed: true)
            var damaged = history.bytes
            damaged[(history.boundaries[2] + history.boundaries[3]) / 2] ^= 0x04
            let storage = try openDataFile(damaged, in: parent, name: "cached")
            #expect(storage.retrieve(type: Int.self, forKey: "a") == 1)  // decoded and cached

            let throwingRead = { () throws in
                switch read {
                case .retrieveOrThrow: _ = try storage.retrieveOrThrow(type: Int.self, forKey: "a")
                case .typedKey: _ = try storage.value(for: TinyStorage.Key<Int>("a", default: 0))
                case .raw: _ = try storage.rawValue(forKey: "a")
                }
            }
            let error = expectError(.corrupted) { try throwingRead() }
            #expect(error?.message.contains("known to be on stable storage") == true, "\(String(describing: error))")
            #expect(throws: Never.self, "reported once") { try throwingRead() }
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "a") == 1)
        }
    }

    @Test func aHugeLengthInTheLastRecordIsCutAsAnInterruptedWrite() throws {
        try withTemporaryDirectory { parent throws in
            let history = try makeHistory(in: parent)
            var damaged = history.bytes
            let start = history.boundaries[5]
            damaged.replaceSubrange(start..<start + 4, with: [0xF0, 0xFF, 0xFF, 0xFF])

            let storage = try openDataFile(damaged, in: parent, name: "huge-last")
            #expect(try storage.rawJSON() == history.models[5])
            #expect(storage.recoveryReports.map(\.damagedRanges) == [[start..<damaged.count]])
            #expect(try quarantined(storage) == [damaged.suffix(from: start)])
        }
    }

    @Test func everyRecordThatVerifiesSurvivesDamageInSeveralPlacesOfDurableData() throws {
        try withTemporaryDirectory { parent throws in
            let history = try makeHistory(in: parent, flushed: true)
            var damaged = history.bytes
            // The last byte of record 4 (`c = [1,2]`: its value's closing bracket) and a byte in
            // the middle of record 2 (`b = "two"`).
            damaged[history.boundaries[4] - 1] ^= 0x01
            damaged[(history.boundaries[1] + history.boundaries[2]) / 2] ^= 0x80

            let storage = try openDataFile(damaged, in: parent, name: "twice")
            expectDataLossReportedOnce(by: storage)
            var expected = history.models[6]
            expected["c"] = nil  // its only record is damaged
            #expect(try storage.rawJSON() == expected)  // `b` was removed later anyway
            let report = try #require(storage.recoveryReports.first)
            #expect(report.isDataLoss)
            #expect(report.recoveredRecordCount == 4)
            #expect(
                report.damagedRanges == [
                    history.boundaries[1]..<history.boundaries[2], history.boundaries[3]..<history.boundaries[4],
                ])
            // The keys the damaged records held are named when they can be read.
            #expect(report.possiblyAffectedKeys.contains("c"), "\(report.possiblyAffectedKeys)")
            #expect(try quarantined(storage) == [damaged])
        }
    }

    /// Damage met while catching up with another instance's commits (not at open) to commits the
    /// writer flushed is data loss, never a crash: every record that verifies is kept, the next
    /// throwing read says so once, and the other instance follows the repaired file. (Only the
    /// data file's durable mark tells flushed commits from the power-loss window: the lock page is
    /// a hint, and a disk can lose what it had not flushed without the machine restarting.)
    @Test func damageFoundWhileCatchingUpIsSalvagedAndEveryInstanceAgrees() throws {
        try withTemporaryDirectory { directory throws in
            let reader = openStore(directory)
            let writer = openStore(directory)
            try writer.storeOrThrow(1, forKey: "before")
            #expect(try reader.retrieveOrThrow(type: Int.self, forKey: "before") == 1)
            // NB: the reader's lock is held meanwhile, so its file watch cannot catch up with
            // these commits before they are damaged.
            try reader.engine.state.withLock { _ in
                var boundaries = [try committedLength(writer.fileURL)]
                for index in 0..<3 {
                    try writer.storeOrThrow("value \(index)", forKey: "k\(index)")
                    boundaries.append(try committedLength(writer.fileURL))
                }
                try writer.synchronize()
                // Damage the middle one of the commits the reader has not read yet, in place.
                let handle = try FileHandle(forUpdating: writer.fileURL)
                try handle.seek(toOffset: UInt64((boundaries[1] + boundaries[2]) / 2))
                let byte = try #require(try handle.read(upToCount: 1))
                try handle.seek(toOffset: UInt64((boundaries[1] + boundaries[2]) / 2))
                try handle.write(contentsOf: Data([byte[0] ^ 0x10]))
                try handle.close()
            }

            let loss = expectError(.corrupted) { try reader.retrieveOrThrow(type: String.self, forKey: "k2") }
            #expect(loss?.message.contains("known to be on stable storage is damaged or missing") == true)
            #expect(try reader.retrieveOrThrow(type: String.self, forKey: "k2") == "value 2")
            #expect(try reader.retrieveOrThrow(type: String.self, forKey: "k1") == nil)
            #expect(reader.recoveryReports.map(\.isDataLoss) == [true])
            #expect(quarantineFiles(of: reader).count == 1)
            // The writer still has `k1` in memory, but follows the repaired file: one truth.
            #expect(try writer.rawJSON() == reader.rawJSON())
            try writer.storeOrThrow("again", forKey: "k1")
            #expect(try reader.retrieveOrThrow(type: String.self, forKey: "k1") == "again")
        }
    }

    @Test func instancesOpeningADamagedStoreAtOnceSalvageItOnce() throws {
        try withTemporaryDirectory { parent throws in
            let history = try makeHistory(in: parent, flushed: true)
            var damaged = history.bytes
            damaged[(history.boundaries[2] + history.boundaries[3]) / 2] ^= 0x04
            let folder = parent.appendingPathComponent("shared", isDirectory: true)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
            try damaged.write(to: folder.appendingPathComponent("store.tinystorage"))

            // The instance that repairs reports the loss once; every instance reads the same data.
            let seen = Locked<(reports: Int, entries: [[String: Data]?])>((0, []))
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                let storage = openStore(parent, name: "shared")
                var entries = try? storage.rawJSON()
                if entries == nil, storage.recoveryReports.first?.isDataLoss == true {
                    entries = try? storage.rawJSON()
                    seen.withLock { $0.reports += 1 }
                }
                seen.withLock { $0.entries.append(entries) }
            }
            var expected = history.models[6]
            expected["a"] = Data("1".utf8)
            #expect(seen.withLock { $0.entries } == Array(repeating: expected, count: 4))
            #expect(seen.withLock { $0.reports } == 1)
            let quarantine = folder.appendingPathComponent("quarantine")
            #expect(try FileManager.default.contentsOfDirectory(atPath: quarantine.path).count == 1)
        }
    }
}
