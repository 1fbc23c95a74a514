import Dispatch
import Foundation
import Testing

@testable import TinyStorage

/// Many threads, one store: atomic operations lose no update, and readers see whole values.
@Suite struct ConcurrencyTests {
    @Test func concurrentIncrementsLoseNoUpdateAndReturnDistinctValues() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let returned = Locked<[Int]>([])
            DispatchQueue.concurrentPerform(iterations: 8) { _ in
                var mine: [Int] = []
                mine.reserveCapacity(1_000)
                for _ in 0..<1_000 { mine.append(storage.incrementInteger(forKey: "counter")) }
                returned.withLock { $0 += mine }
            }
            #expect(storage.integer(forKey: "counter") == 8_000)
            // Each increment saw a different value: together they are exactly 1...8000.
            #expect(returned.withLock { $0.sorted() } == Array(1...8_000))
            #expect(openStore(directory).integer(forKey: "counter") == 8_000)
        }
    }

    @Test func concurrentIncrementsThroughTaskGroupsLoseNoUpdate() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("TinyStorageTests-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = openStore(directory)
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for _ in 0..<250 { storage.incrementInteger(forKey: "shared", by: 2) }
                    storage.incrementInteger(forKey: "task\(task)", by: task)
                }
            }
        }
        #expect(storage.integer(forKey: "shared") == 4_000)
        for task in 0..<8 { #expect(storage.integer(forKey: "task\(task)") == task) }
    }

    @Test func concurrentWritersAndReadersEndWithExactValues() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let writers = 4
            let values = 500
            let problems = Locked<[String]>([])
            DispatchQueue.concurrentPerform(iterations: writers * 2) { index in
                if index < writers {
                    for value in 1...values { storage.store(value, forKey: "writer\(index)") }
                    storage.store("done \(index)", forKey: "status\(index)")
                } else {
                    // Each key is written in increasing order by one thread, so one reader's
                    // successive reads of it never go backwards.
                    var lastSeen = [Int](repeating: 0, count: writers)
                    for round in 0..<2_000 {
                        let key = round % writers
                        let value = storage.retrieve(type: Int.self, forKey: "writer\(key)") ?? 0
                        if value < lastSeen[key] || value > values {
                            problems.withLock { $0.append("writer\(key): \(value) after \(lastSeen[key])") }
                        }
                        lastSeen[key] = value
                    }
                }
            }
            #expect(problems.withLock { $0 }.isEmpty)
            let reopened = openStore(directory)
            for index in 0..<writers {
                #expect(storage.integer(forKey: "writer\(index)") == values)
                #expect(reopened.integer(forKey: "writer\(index)") == values)
                #expect(reopened.retrieve(type: String.self, forKey: "status\(index)") == "done \(index)")
            }
        }
    }

    @Test func twoInstancesOnOneStoreIncrementExactly() throws {
        try withTemporaryDirectory { directory throws in
            let first = openStore(directory)
            let second = openStore(directory)
            DispatchQueue.concurrentPerform(iterations: 8) { index in
                let storage = index.isMultiple(of: 2) ? first : second
                for _ in 0..<500 { storage.incrementInteger(forKey: "counter") }
            }
            #expect(first.integer(forKey: "counter") == 4_000)
            #expect(second.integer(forKey: "counter") == 4_000)
            #expect(openStore(directory).integer(forKey: "counter") == 4_000)
        }
    }

    @Test func bulkStoresAreSeenWholeByConcurrentReaders() throws {
        try withTemporaryDirectory { directory throws in
            let writer = openStore(directory)
            let reader = openStore(directory)
            let keys = (0..<20).map { "bulk\($0)" }
            writer.bulkStore(items: Dictionary(uniqueKeysWithValues: keys.map { ($0, 0) }))
            let torn = Locked<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                if index == 0 {
                    for generation in 1...300 {
                        writer.bulkStore(items: Dictionary(uniqueKeysWithValues: keys.map { ($0, generation) }))
                    }
                } else {
                    for _ in 0..<300 {
                        // One snapshot of the raw entries must hold one generation for all keys.
                        guard let entries = try? reader.rawJSON() else {
                            torn.withLock { $0.append("unavailable") }
                            continue
                        }
                        let generations = Set(keys.map { entries[$0] })
                        if generations.count != 1 { torn.withLock { $0.append("\(generations)") } }
                    }
                }
            }
            #expect(torn.withLock { $0 }.isEmpty)
            #expect(Set(keys.map { reader.integer(forKey: $0) }) == [300])
        }
    }
}
