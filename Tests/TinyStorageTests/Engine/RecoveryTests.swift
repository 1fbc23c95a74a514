import Foundation
import Testing

@testable import TinyStorage

/// G3 and G4 on real files: a torn or damaged tail is set aside in `quarantine/` and cut off;
/// every record before it survives; the store opens, keeps working, and never resets to empty.
@Suite struct RecoveryTests {
    static let earlier: [(key: String, value: String)] = [
        ("a", "first"), ("b", "second \"quoted\""), ("c", "third/ünïcödé"), ("a", "first, overwritten"),
        ("d", String(repeating: "fourth ", count: 10)),
    ]
    static let expectedEarlier = [
        "a": "first, overwritten", "b": "second \"quoted\"", "c": "third/ünïcödé",
        "d": String(repeating: "fourth ", count: 10),
    ]

    /// A store holding `earlier`, then one more record (`last` → a 100-character value), none of
    /// it flushed since the file was created: what a power loss may tear.
    /// - Returns: the store directory and the byte range of the last record.
    func makeStore(in parent: URL) throws -> (URL, Range<Int>) {
        let storage = openStore(
            parent, name: "original", options: Engine.Options(backgroundFlushes: false, watchesChanges: false))
        for (key, value) in Self.earlier { try storage.storeOrThrow(value, forKey: key) }
        let start = storage.engine.state.withLock { $0.log.end }
        try storage.storeOrThrow(String(repeating: "L", count: 100), forKey: "last")
        let end = storage.engine.state.withLock { $0.log.end }
        #expect(end - start > 100)
        #expect(try committedLength(storage.fileURL) == end)
        return (storage.directoryURL, start..<end)
    }

    /// Copies the store at `original` into a fresh directory, lets `damage` change its data file,
    /// and opens the copy as after a restart: without the lock file, whose page would say what
    /// was committed during this boot (damage to that is data loss, not a crash).
    func openDamagedCopy(
        of original: URL, in parent: URL, logger: TestLogger = TestLogger(), damage: (URL) throws -> Void
    ) throws -> TinyStorage {
        let copy = try copyDirectory(original, into: parent)
        try FileManager.default.removeItem(at: copy.appendingPathComponent("store.lock"))
        try damage(copy.appendingPathComponent("store.tinystorage"))
        return TinyStorage(
            insideDirectory: copy.deletingLastPathComponent(), name: copy.lastPathComponent,
            durability: .standard, io: .system, logger: logger)
    }

    func expectEarlierValuesIntact(_ storage: TinyStorage, _ comment: String) throws {
        #expect(storage.availability.isAvailable, "\(comment)")
        for (key, value) in Self.expectedEarlier {
            #expect(try storage.retrieveOrThrow(type: String.self, forKey: key) == value, "\(comment): key \(key)")
        }
    }

    @Test func truncatingAnywhereInsideTheLastRecordKeepsEveryEarlierRecord() throws {
        try withTemporaryDirectory { parent throws in
            let (original, last) = try makeStore(in: parent)
            let originalBytes = try Data(contentsOf: original.appendingPathComponent("store.tinystorage"))
            for offset in last {
                let logger = TestLogger()
                let storage = try openDamagedCopy(of: original, in: parent, logger: logger) {
                    try truncateFile($0, to: offset)
                }
                try expectEarlierValuesIntact(storage, "cut at \(offset)")
                #expect(try storage.retrieveOrThrow(type: String.self, forKey: "last") == nil, "cut at \(offset)")
                #expect(try committedLength(storage.fileURL) == last.lowerBound, "cut at \(offset)")

                // The cut-off bytes are kept, byte for byte, unless there were none.
                let quarantined = quarantineFiles(of: storage)
                if offset == last.lowerBound {
                    #expect(quarantined.isEmpty, "cut at \(offset)")
                    #expect(storage.recoveryReports.isEmpty, "cut at \(offset)")
                } else {
                    #expect(storage.recoveryReports.map(\.isInterruptedWrite) == [true], "cut at \(offset)")
                    #expect(quarantined.count == 1, "cut at \(offset)")
                    var expected = originalBytes[last.lowerBound..<offset]
                    while expected.last == 0 { expected.removeLast() }
                    if let file = quarantined.first {
                        #expect(try Data(contentsOf: file) == expected, "cut at \(offset)")
                        #expect(try permissions(file) == 0o600)
                        #expect(try permissions(file.deletingLastPathComponent()) == 0o700)
                        #expect(logger.texts(atLeast: .info).contains { $0.contains(file.lastPathComponent) })
                    }
                }

                // The store keeps working, and the new write survives another reopen.
                try storage.storeOrThrow("after recovery", forKey: "new")
                let reopened = TinyStorage(
                    insideDirectory: storage.directoryURL.deletingLastPathComponent(),
                    name: storage.directoryURL.lastPathComponent, logger: TestLogger())
                try expectEarlierValuesIntact(reopened, "reopened after cut at \(offset)")
                #expect(try reopened.retrieveOrThrow(type: String.self, forKey: "new") == "after recovery")
                #expect(try reopened.retrieveOrThrow(type: String.self, forKey: "last") == nil)
                #expect(quarantineFiles(of: reopened).count == (offset == last.lowerBound ? 0 : 1))
                try FileManager.default.removeItem(at: storage.directoryURL)
            }
        }
    }

    @Test func flippingAnyByteOfTheLastRecordDropsOnlyThatRecord() throws {
        try withTemporaryDirectory { parent throws in
            let (original, last) = try makeStore(in: parent)
            for offset in last {
                let storage = try openDamagedCopy(of: original, in: parent) { url in
                    var bytes = try Data(contentsOf: url)
                    bytes[offset] ^= 0x5A
                    try bytes.write(to: url)
                }
                try expectEarlierValuesIntact(storage, "flipped byte \(offset)")
                #expect(try storage.retrieveOrThrow(type: String.self, forKey: "last") == nil, "flipped \(offset)")
                #expect(quarantineFiles(of: storage).count == 1, "flipped byte \(offset)")
                try storage.storeOrThrow(1, forKey: "new")
                #expect(storage.integer(forKey: "new") == 1)
                try FileManager.default.removeItem(at: storage.directoryURL)
            }
        }
    }

    /// Damage in the middle of durable data (a flush confirmed it) is not a power loss: every
    /// record that verifies, before and after it, is recovered, and the loss is reported as such.
    @Test func aDamagedRecordInTheMiddleOfDurableDataLosesOnlyThatRecord() throws {
        try withTemporaryDirectory { parent throws in
            let storage = openStore(parent, name: "original")
            var boundaries: [Int] = []
            for index in 0..<10 {
                boundaries.append(try committedLength(storage.fileURL))
                try storage.storeOrThrow("value \(index)", forKey: "key\(index)")
            }
            boundaries.append(try committedLength(storage.fileURL))
            try storage.synchronize()
            let damaged = 4
            let flipped = (boundaries[damaged] + boundaries[damaged + 1]) / 2

            let logger = TestLogger()
            var damagedBytes = Data()
            let copy = try openDamagedCopy(of: storage.directoryURL, in: parent, logger: logger) { url in
                var bytes = try Data(contentsOf: url)
                bytes[flipped] ^= 0x01
                try bytes.write(to: url)
                damagedBytes = bytes
            }
            // G3: every record that verifies is recovered, before and after the damage; the first
            // throwing read says that durable data was lost.
            #expect(copy.availability.isAvailable)
            expectError(.corrupted) { try copy.retrieveOrThrow(type: String.self, forKey: "key0") }
            for index in 0..<10 where index != damaged {
                #expect(try copy.retrieveOrThrow(type: String.self, forKey: "key\(index)") == "value \(index)")
            }
            #expect(try copy.retrieveOrThrow(type: String.self, forKey: "key\(damaged)") == nil)

            // Nothing is silently lost: the damaged file is kept byte for byte, and reported.
            let quarantined = quarantineFiles(of: copy)
            try #require(quarantined.count == 1)
            #expect(try Data(contentsOf: quarantined[0]) == damagedBytes)
            #expect(!logger.texts(atLeast: .warning).isEmpty, "corruption must be reported")
            let reports = copy.recoveryReports
            try #require(reports.count == 1)
            #expect(reports[0].error.code == .corrupted)
            #expect(!reports[0].isInterruptedWrite)
            #expect(reports[0].isDataLoss)
            #expect(reports[0].recoveredRecordCount == 9)
            #expect(reports[0].damagedRanges.contains { $0.contains(flipped) })
            #expect(reports[0].damagedRanges.allSatisfy { $0.overlaps(boundaries[damaged]..<boundaries[damaged + 1]) })
            #expect(reports[0].quarantineURL.standardizedFileURL == quarantined[0].standardizedFileURL)

            // The rebuilt file verifies: reopening finds no new damage, and writes work.
            try copy.storeOrThrow("works", forKey: "after")
            let reopened = TinyStorage(
                insideDirectory: copy.directoryURL.deletingLastPathComponent(),
                name: copy.directoryURL.lastPathComponent, logger: TestLogger())
            #expect(reopened.retrieve(type: String.self, forKey: "after") == "works")
            #expect(reopened.retrieve(type: String.self, forKey: "key9") == "value 9")
            #expect(reopened.recoveryReports.isEmpty)
            #expect(quarantineFiles(of: reopened).count == 1)
        }
    }

    /// Earlier versions preallocated zero-filled space past the last record of durable stores;
    /// such files open as they are, and the zeros are neither damage nor a commit.
    @Test func zeroFilledSpaceAfterTheLastRecordIsNotDamage() throws {
        try withTemporaryDirectory { parent throws in
            let (original, last) = try makeStore(in: parent)
            let dataFile = original.appendingPathComponent("store.tinystorage")
            try (try Data(contentsOf: dataFile).prefix(last.upperBound) + Data(count: 256 << 10)).write(to: dataFile)
            for _ in 0..<2 {
                let storage = TinyStorage(
                    insideDirectory: parent, name: original.lastPathComponent, durability: .immediate,
                    logger: TestLogger())
                try expectEarlierValuesIntact(storage, "durable store")
                #expect(quarantineFiles(of: storage).isEmpty)
                try storage.storeOrThrow(storage.integer(forKey: "opens") + 1, forKey: "opens")
            }
            let storage = openStore(parent, name: original.lastPathComponent)
            #expect(storage.integer(forKey: "opens") == 2)
            #expect(storage.retrieve(type: String.self, forKey: "last")?.count == 100)
        }
    }

    @Test func aTornRecordInsideZeroFilledSpaceIsCutAndLaterWritesSurvive() throws {
        try withTemporaryDirectory { parent throws in
            let (original, last) = try makeStore(in: parent)
            let storage = try openDamagedCopy(of: original, in: parent) { url in
                // Zero the second half of the last record, as if only its first pages reached disk.
                var bytes = try Data(contentsOf: url)
                let middle = (last.lowerBound + last.upperBound) / 2
                bytes.replaceSubrange(middle..<last.upperBound, with: Data(count: last.upperBound - middle))
                try bytes.write(to: url)
            }
            try expectEarlierValuesIntact(storage, "torn durable record")
            #expect(storage.retrieve(type: String.self, forKey: "last") == nil)
            // A torn last record is the ordinary result of a crash mid-write, not corruption: the
            // report says so, and counts the record, not the preallocated zeros after it.
            #expect(storage.recoveryReports.map(\.isInterruptedWrite) == [true])
            #expect(storage.recoveryReports.allSatisfy { $0.damagedByteCount <= last.count })
            try storage.storeOrThrow("kept", forKey: "next")
            let reopened = TinyStorage(
                insideDirectory: storage.directoryURL.deletingLastPathComponent(),
                name: storage.directoryURL.lastPathComponent, durability: .immediate, logger: TestLogger())
            try expectEarlierValuesIntact(reopened, "reopened")
            #expect(reopened.retrieve(type: String.self, forKey: "next") == "kept")
        }
    }

    @Test func aDamagedHeaderIsSalvagedAndTheOriginalKept() throws {
        try withTemporaryDirectory { parent throws in
            let storage = openStore(parent)
            try storage.storeOrThrow(364, forKey: "streak")
            try storage.storeOrThrow("Ada", forKey: "name")
            var bad = try Data(contentsOf: storage.fileURL)
            bad[20] ^= 0xFF  // inside the header: its checksum fails
            // NB: replaced atomically (rename), as stores watch the directory and would otherwise
            // see a half-written file.
            try bad.write(to: storage.fileURL, options: .atomic)

            let damaged = openStore(parent)
            #expect(damaged.availability.isAvailable)
            #expect(try damaged.retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
            #expect(try damaged.retrieveOrThrow(type: String.self, forKey: "name") == "Ada")
            #expect(damaged.recoveryReports.count == 1)
            let quarantined = quarantineFiles(of: damaged)
            try #require(quarantined.count == 1)
            #expect(try Data(contentsOf: quarantined[0]) == bad)
            #expect(throws: Never.self, "the rebuilt file has a valid header") { try headerGeneration(damaged.fileURL) }
        }
    }

    /// A file with nothing TinyStorage can verify in it (another program's file, or one written by
    /// a newer, incompatible version) is not a damaged store to rebuild: answering "empty" would
    /// invent values (G1) and replacing it would clobber data that could not be read (G2).
    @Test(arguments: [
        ("not a store", Array("{\"streak\": 364}\n".utf8)),
        ("newer format", LogHeader(version: LogFormat.newestVersion + 1, generation: 1).encoded() + [1, 2, 3]),
        ("short", [0x89, 0x54]),
    ])
    func foreignFilesAreNeverOverwritten(description: String, contents: [UInt8]) throws {
        try withTemporaryDirectory { parent throws in
            let directory = parent.appendingPathComponent("store", isDirectory: true)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let file = directory.appendingPathComponent("store.tinystorage")
            try Data(contents).write(to: file)

            let storage = openStore(parent)
            let error = try #require(unavailabilityError(storage), "\(description)")
            #expect([.corrupted, .unsupportedFormat].contains(error.code), "\(description): \(error)")
            expectError(.unavailable) { try storage.retrieveOrThrow(type: Int.self, forKey: "streak") }
            expectError(.unavailable) { try storage.storeOrThrow(1, forKey: "k") }
            storage.store(1, forKey: "k")
            storage.reset()
            #expect(storage.integer(forKey: "streak") == 0)  // the documented fallback; nothing stored
            #expect(try Data(contentsOf: file) == Data(contents), "\(description)")
        }
    }
}
