import Foundation
import Testing

@testable import TinyStorage

/// An open reads the whole data file, the space allocated ahead of the log included (Linux's
/// mapped appends): what lies past the log inside that space is found, set aside and reported.
@Suite struct SpaceAllocatedAheadTests {
    /// Bytes left deep inside the space allocated ahead of a log are found by the next open, set
    /// aside and reported.
    @Test(.enabled(if: isLinux, "appends through a mapping allocate space ahead on Linux"))
    func bytesDeepInTheSpaceAllocatedAheadAreFoundByAnOpen() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            for index in 0..<10 { try storage.storeOrThrow(index, forKey: "k\(index)") }
            try storage.synchronize()
            let size = try #require(
                try FileManager.default.attributesOfItem(atPath: storage.fileURL.path)[.size] as? Int)
            try #require(size >= 60_000, "allocated ahead: \(size) bytes")
            let handle = try FileHandle(forWritingTo: storage.fileURL)
            try handle.seek(toOffset: UInt64(size - 5_000))
            try handle.write(contentsOf: Data([9, 8, 7, 6, 5]))
            try handle.close()

            let reopened = openStore(directory)
            #expect(reopened.integer(forKey: "k9") == 9)
            let report = try #require(reopened.recoveryReports.first)
            #expect(report.isInterruptedWrite)
            #expect(report.damagedRanges.last?.upperBound == size - 4_995)
        }
    }
}
