import Foundation
import Testing
import TinyStorage

/// G3 with several processes: when processes open a damaged store at the same time, exactly one
/// of them repairs it (one quarantine copy), and all of them see the same recovered data.
///
/// The processes start, wait, and are released together, as the increment tests' are; that
/// their opens overlap is likely, not certain. The race itself (a repair deciding from bytes
/// another process changed before it took the lock) is made to happen, step by step, by
/// `RepairRaceTests` in the unit tests.
@Suite struct ConcurrentRecoveryTests {
    @Test func processesOpeningADamagedStoreTogetherSalvageItOnceAndAgree() throws {
        try withTemporaryDirectory { directory throws in
            var boundaries: [Int] = []
            let fileURL: URL
            do {
                let storage = openStore(directory)
                for index in 0..<10 {
                    boundaries.append(try committedLength(storage.fileURL))
                    try storage.storeOrThrow("value \(index)", forKey: "key\(index)")
                }
                boundaries.append(try committedLength(storage.fileURL))
                try storage.synchronize()  // the damage is below the durable mark: data loss
                fileURL = storage.fileURL
            }
            // Damage the sixth record's payload: the records before and after it still verify.
            var bytes = try Data(contentsOf: fileURL)
            bytes[(boundaries[5] + boundaries[6]) / 2] ^= 0x20
            try bytes.write(to: fileURL, options: .atomic)

            let readers = try (0..<4).map { _ in
                try HelperProcess(["dump", directory.path, "store", "--wait-for-go"], withInput: true)
            }
            for reader in readers { #expect(reader.readLine() == "ready", "\(reader.errorOutput)") }
            for reader in readers { try reader.send("go") }
            var outputs: [[String]] = []
            for reader in readers {
                var lines: [String] = []
                while let line = reader.readLine() { lines.append(line) }
                #expect(reader.waitForExit() == 0, "\(reader.errorOutput)")
                outputs.append(lines)
            }
            let expected = (0..<10).filter { $0 != 5 }.map { "{\"key\":\"key\($0)\",\"value\":\"value \($0)\"}" }
                .sorted()
            for output in outputs { #expect(output == expected) }
            // The one that repaired was told of the loss by its first throwing read.
            #expect(readers.filter { $0.errorOutput.contains("reported: ") }.count == 1)

            let quarantine = directory.appendingPathComponent("store/quarantine")
            let quarantined = try FileManager.default.contentsOfDirectory(atPath: quarantine.path)
            #expect(quarantined.count == 1, "\(quarantined)")
            if let name = quarantined.first {
                #expect(try Data(contentsOf: quarantine.appendingPathComponent(name)) == bytes)
            }
            // The repaired file is healthy: opening it again finds nothing to recover.
            let storage = openStore(directory)
            #expect(storage.recoveryReports.isEmpty)
            #expect(storage.allKeys.count == 9)
            #expect(storage.retrieve(type: String.self, forKey: "key9") == "value 9")
        }
    }
}
