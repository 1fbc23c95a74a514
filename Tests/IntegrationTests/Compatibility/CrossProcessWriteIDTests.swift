import Foundation
import Testing
import TinyStorage

/// Issue 9, item 1, across processes: the writeID string a 2.x app passes reaches an observer in
/// another process exactly, and that observer hears it on its main thread (the helper's observer
/// calls `MainActor.assumeIsolated`, which stops it if a notification arrives anywhere else).
@Suite struct CrossProcessWriteIDTests {
    @Test func aWriteIDStringReachesAnObserverInAnotherProcessOnItsMainThread() throws {
        try withTemporaryDirectory { directory throws in
            let watchdog = Watchdog()
            defer { watchdog.cancel() }
            let storage = openStore(directory)
            let observer = watchdog.guarding(try HelperProcess(["observe", directory.path, "store"], withInput: true))
            #expect(observer.readLine() == "ready", "\(observer.errorOutput)")

            let writeIDs: [String?] = [
                "sync-42", "", "with spaces, \"quotes\" and é 🔑", nil, String(repeating: "w", count: 1024),
            ]
            var expected: [String] = []
            for (index, writeID) in writeIDs.enumerated() {
                try storage.storeOrThrow(index, forKey: "k\(index)", writeID: writeID)
                expected.append(changeLine(keys: ["k\(index)"], writeID: writeID))
            }
            storage.bulkStore(items: ["k0": nil, "k1": nil], writeID: "bulk")
            expected.append(changeLine(keys: ["k0", "k1"], writeID: "bulk"))

            #expect(readLines(from: observer, count: expected.count) == expected, "\(observer.errorOutput)")
            #expect(observer.killHard() == [])
            #expect(!watchdog.fired)
        }
    }
}
