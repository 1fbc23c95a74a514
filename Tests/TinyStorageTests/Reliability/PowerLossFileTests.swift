import Foundation
import Testing

@testable import TinyStorage

/// Issue 11's two gaps with data files built byte by byte and opened from a real disk: what
/// recovery may apply after a torn record, and a file cut below its durable mark.
@Suite struct PowerLossFileTests {
    /// A version 2 file holding one commit per key, in order, from sequence 1; returns the bytes
    /// and where each record starts and ends.
    static func file(keys: [String]) -> (bytes: [UInt8], records: [Range<Int>]) {
        var bytes = LogHeader(generation: 1).encoded()
        var records: [Range<Int>] = []
        for (index, key) in keys.enumerated() {
            let start = bytes.count
            LogCommit(sequence: UInt64(index + 1), operations: [.put(key: key, value: Data("\(index)".utf8))])
                .encode(into: &bytes)
            records.append(start..<bytes.count)
        }
        return (bytes, records)
    }

    static func install(_ bytes: [UInt8], in parent: URL) throws {
        let folder = parent.appendingPathComponent("store", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
        try Data(bytes).write(to: folder.appendingPathComponent(StoreLocation.dataFileName))
    }

    /// Records N and N+2 intact, N+1 torn, all past the durable mark (the unflushed tail): N+2
    /// is not applied, it is set aside in quarantine, and the cut is reported as an interrupted
    /// write — a power loss, not data loss.
    @Test func aRecordAfterATornOneInTheUnflushedTailIsSetAsideNotApplied() throws {
        try withTemporaryDirectory { parent throws in
            var (bytes, records) = Self.file(keys: ["a", "b", "c", "d"])
            LogHeader.setDurableMark(records[1].upperBound, in: &bytes)  // a and b are flushed
            bytes[records[2].upperBound - 2] ^= 0x40  // c (N+1) is torn; d (N+2) verifies
            try Self.install(bytes, in: parent)

            let storage = openStore(parent)
            #expect(try storage.rawJSON() == ["a": Data("0".utf8), "b": Data("1".utf8)])
            let report = try #require(storage.recoveryReports.first)
            #expect(report.isInterruptedWrite && !report.isDataLoss, "\(report)")
            #expect(report.setAsideRecordCount == 1, "d is set aside")
            #expect(try quarantined(storage) == [Data(bytes[records[2].lowerBound...])])
            #expect(throws: Never.self, "a power loss is no error") { try storage.rawJSON() }
        }
    }

    /// A file cut to half of what its durable mark says was flushed: the keys past the cut are
    /// gone, and that is reported as data loss, by the log, the report and the next throwing read.
    @Test func aFileCutBelowItsDurableMarkIsReportedAsDataLossByAThrowingRead() throws {
        try withTemporaryDirectory { parent throws in
            var (bytes, _) = Self.file(keys: (0..<20).map { "key\($0)" })
            LogHeader.setDurableMark(bytes.count, in: &bytes)
            try Self.install(Array(bytes.prefix(bytes.count / 2)), in: parent)

            let logger = TestLogger()
            let storage = openStore(parent, logger: logger)
            let error = expectError(.corrupted) { try storage.retrieveOrThrow(type: Int.self, forKey: "key0") }
            #expect(error?.message.contains("known to be on stable storage") == true, "\(String(describing: error))")
            #expect(storage.recoveryReports.map(\.isDataLoss) == [true])
            #expect(logger.texts(atLeast: .error).contains { $0.contains("known to be on stable storage") })
            let left = try storage.rawJSON()
            #expect(left.count < 20 && left["key0"] == Data("0".utf8), "what verifies is kept")
        }
    }

    private func quarantined(_ storage: TinyStorage) throws -> [Data] {
        try quarantineFiles(of: storage).map { try Data(contentsOf: $0) }
    }
}
