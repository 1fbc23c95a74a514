import Foundation
import Testing

@testable import TinyStorage

/// A repair decides from the bytes it read without the lock, then takes the lock to act: it acts
/// only if nobody published anything in between. The file's size alone cannot tell: another
/// process may have repaired the same damage and committed a record exactly as long as the
/// damage it cut off.
@Suite struct RepairRaceTests {
    /// A data file with one record ("a" = 1) and, after it, 40 bytes of garbage: no lock page yet,
    /// so the first store to open it checks it from its start.
    func writeDamagedStore(in parent: URL) throws {
        let folder = parent.appendingPathComponent("store", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var bytes = LogHeader(generation: 1).encoded()
        LogCommit(sequence: 1, operations: [.put(key: "a", value: Data("1".utf8))]).encode(into: &bytes)
        bytes += [UInt8](repeating: 0xAB, count: 40)
        try Data(bytes).write(to: folder.appendingPathComponent(StoreLocation.dataFileName))
    }

    @Test func aRepairActsOnlyIfNothingWasPublishedSinceItReadTheFile() throws {
        try withTemporaryDirectory { parent throws in
            try writeDamagedStore(in: parent)
            // The record `other` commits: 40 bytes, as long as the garbage.
            let record = LogCommit(operations: [.put(key: "k", value: Data("\"abcdef\"".utf8))])
            try #require(record.encodedSize == 40)

            let faults = FaultSwitch()
            let readFile = Locked(false)
            let other = Locked<TinyStorage?>(nil)
            faults.inject { call, _ in
                if call == .read { readFile.withLock { $0 = true } }
                // After this store read the damaged file, and before it takes the lock to cut it:
                // another store repairs it, and commits 40 bytes where the garbage was.
                guard call == .lock, readFile.withLock({ $0 }), other.withLock({ $0 == nil }) else { return nil }
                let second = openStore(parent)
                other.withLock { $0 = second }
                try? second.storeOrThrow("abcdef", forKey: "k")
                return nil
            }
            let storage = openStore(parent, io: faults.io)
            faults.clear()

            #expect(try other.withLock({ $0 })?.retrieveOrThrow(type: String.self, forKey: "k") == "abcdef")
            #expect(try storage.retrieveOrThrow(type: String.self, forKey: "k") == "abcdef")
            let fresh = openStore(parent)
            #expect(try fresh.retrieveOrThrow(type: String.self, forKey: "k") == "abcdef", "a commit was cut off")
            #expect(try fresh.retrieveOrThrow(type: Int.self, forKey: "a") == 1)
        }
    }
}
