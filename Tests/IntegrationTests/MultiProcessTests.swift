import Foundation
import Testing
import TinyStorage

/// G5: atomic operations from several processes at once lose no update.
@Suite struct MultiProcessTests {
    /// Starts `count` helpers incrementing `key` `times` times each, lets them all go at once and
    /// returns them; `alongside` runs in this process meanwhile.
    func incrementConcurrently(
        directory: URL, key: String, processes count: Int, times: Int, alongside: () -> Void = {}
    ) throws {
        let helpers = try (0..<count).map { _ in
            try HelperProcess(
                ["increment", directory.path, "store", key, "\(times)", "--wait-for-go"], withInput: true)
        }
        // Every helper has opened the store and waits: releasing them together makes them overlap.
        for helper in helpers { #expect(helper.readLine() == "ready", "\(helper.errorOutput)") }
        for helper in helpers { try helper.send("go") }
        alongside()
        for helper in helpers { #expect(helper.waitForExit() == 0, "\(helper.errorOutput)") }
    }

    @Test func processesAndThreadsIncrementingTogetherEndExact() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow(100, forKey: "counter")
            try incrementConcurrently(directory: directory, key: "counter", processes: 2, times: 300) {
                DispatchQueue.concurrentPerform(iterations: 2) { _ in
                    for _ in 0..<200 { storage.incrementInteger(forKey: "counter") }
                }
            }
            #expect(storage.integer(forKey: "counter") == 100 + 2 * 300 + 2 * 200)
            #expect(openStore(directory).integer(forKey: "counter") == 1_100)
        }
    }
}
