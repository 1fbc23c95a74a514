import Foundation
import Testing

@testable import TinyStorage

/// `.immediate` commits behave like `.standard` ones, and both survive a reopen.
@Suite struct DurabilityTests {
    @Test(arguments: [TinyStorage.Durability.standard, .immediate])
    func valuesSurviveReopen(durability: TinyStorage.Durability) throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory, durability: durability)
            #expect(storage.durability == durability)
            try storage.storeOrThrow(1, forKey: "a")
            try storage.storeOrThrow("two", forKey: "b")
            try storage.bulkStoreOrThrow(items: ["c": 3, "d": 4])
            try storage.storeOrThrow(nil, forKey: "d")
            #expect(try storage.incrementIntegerOrThrow(forKey: "a", by: 9) == 10)
            let reopened = openStore(directory, durability: durability)
            #expect(reopened.integer(forKey: "a") == 10)
            #expect(reopened.retrieve(type: String.self, forKey: "b") == "two")
            #expect(reopened.integer(forKey: "c") == 3)
            #expect(!reopened.contains("d"))
            // A store written durably opens with the other mode and the other way round.
            let other = openStore(directory, durability: durability == .immediate ? .standard : .immediate)
            #expect(other.integer(forKey: "a") == 10)
        }
    }

    @Test func manyDurableCommitsFromSeveralThreadsAllSurvive() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory, durability: .immediate)
            DispatchQueue.concurrentPerform(iterations: 4) { thread in
                for value in 0..<50 { storage.store(value, forKey: "thread\(thread)") }
                for _ in 0..<50 { storage.incrementInteger(forKey: "shared") }
            }
            let reopened = openStore(directory)
            for thread in 0..<4 { #expect(reopened.integer(forKey: "thread\(thread)") == 49) }
            #expect(reopened.integer(forKey: "shared") == 200)
        }
    }
}
