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

    /// A `.standard` commit never waits for the disk: not even while the background flush that
    /// an earlier commit scheduled is inside `fdatasync` (which, on a slow disk, takes
    /// milliseconds). Here that flush is held inside the call until the commits are done.
    @Test func aStandardCommitDoesNotWaitForTheBackgroundFlush() throws {
        try withTemporaryDirectory { directory throws in
            let held = HeldFlush()
            let flushes = ManualFlushes()
            let storage = openStore(directory, io: held.io, options: Engine.Options(flushScheduler: flushes.scheduler))
            try storage.storeOrThrow(1, forKey: "a")
            #expect(flushes.count == 1)

            held.hold()
            let flusher = DispatchSemaphore(value: 0)
            Thread {
                flushes.runAll()
                flusher.signal()
            }.start()
            held.waitUntilHeld()  // the background flush is inside `fdatasync` now
            let finished = held.finishesWhileHeld {
                try? storage.storeOrThrow(2, forKey: "a")
                try? storage.storeOrThrow(3, forKey: "b")
            }
            #expect(finished, "a .standard commit waited for the background flush")

            flusher.wait()
            flushes.runAll()  // the flush the later commits asked for
            #expect(storage.integer(forKey: "a") == 2 && storage.integer(forKey: "b") == 3)
            #expect(openStore(directory).integer(forKey: "b") == 3)
        }
    }

    /// A store released right after a `.standard` commit still flushes it, as the commit was
    /// promised (on the disk within about a second, however long the instance lives), and
    /// records in the header how far the file is durable; then it schedules nothing more. The
    /// README says so ("Not guaranteed"), as does `TinyStorage`'s `deinit`.
    @Test func aReleasedStoreFinishesItsBackgroundFlushThenStops() throws {
        try withTemporaryDirectory { directory throws in
            let flushes = ManualFlushes()
            var storage: TinyStorage? = openStore(directory, options: Engine.Options(flushScheduler: flushes.scheduler))
            try storage?.storeOrThrow(364, forKey: "streak")
            let fileURL = try #require(storage?.fileURL)
            weak let released = storage
            storage = nil
            #expect(released == nil, "something kept the store alive")
            #expect(flushes.count == 1)
            let end = LogFormat.framesEnd(of: [UInt8](try Data(contentsOf: fileURL)))
            #expect(try durableMark(of: fileURL) < end)

            #expect(flushes.runAll() == 2, "the commit's flush, then the flush of the mark it wrote")
            #expect(try durableMark(of: fileURL) == end)
        }
    }

    /// After `synchronize()`, the flush a released store has pending finds everything done and
    /// writes nothing: tests that compare a store's bytes across a slow step rely on it.
    @Test func afterSynchronizeTheFlushAReleasedStoreHasPendingWritesNothing() throws {
        try withTemporaryDirectory { directory throws in
            let flushes = ManualFlushes()
            var storage: TinyStorage? = openStore(directory, options: Engine.Options(flushScheduler: flushes.scheduler))
            try storage?.storeOrThrow(364, forKey: "streak")
            try storage?.synchronize()
            let fileURL = try #require(storage?.fileURL)
            let bytes = try Data(contentsOf: fileURL)
            storage = nil

            #expect(flushes.runAll() > 0, "nothing was left pending")
            #expect(try Data(contentsOf: fileURL) == bytes)
        }
    }

    func durableMark(of fileURL: URL) throws -> Int {
        try Data(contentsOf: fileURL).withUnsafeBytes { LogHeader.durableMark(in: $0) }
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
