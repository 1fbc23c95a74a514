import Foundation
import Testing
import TinyStorage

/// Issue 3 (SPEC G5, G6) with real OS processes, the `TinyStorageTestHelper` executable: atomic
/// operations from several processes lose nothing, a read sees every commit another process
/// finished, every commit is announced once in every process with its keys and writeID, in the
/// same order everywhere, and compaction by one process while others work loses nothing.
///
/// The tests wait on the helpers' output lines and on notifications, never for a length of time.
/// A ``Watchdog`` kills helpers that outlive a generous deadline, so a hang fails instead of
/// blocking the run.
@Suite struct CrossProcessChangeTests {
    /// Starts one helper per argument list, each waiting for "go" (`--wait-for-go`), and lets
    /// them all go at once, after every one of them has opened the store.
    func startTogether(_ argumentLists: [[String]], watchdog: Watchdog) throws -> [HelperProcess] {
        let helpers = try argumentLists.map { watchdog.guarding(try HelperProcess($0, withInput: true)) }
        for helper in helpers { #expect(helper.readLine() == "ready", "\(helper.errorOutput)") }
        for helper in helpers { try helper.send("go") }
        return helpers
    }

    // MARK: Atomic operations

    @Test func fourProcessesIncrementingOneKeyFiveHundredTimesEachEndAtExactly2000() throws {
        try withTemporaryDirectory { directory throws in
            let watchdog = Watchdog()
            defer { watchdog.cancel() }
            // Opened and read before the helpers start: it must see their commits afterwards.
            let storage = openStore(directory)
            #expect(storage.integer(forKey: "counter") == 0)

            let helpers = try startTogether(
                (0..<4).map { _ in ["increment", directory.path, "store", "counter", "500", "--wait-for-go"] },
                watchdog: watchdog)
            for helper in helpers { #expect(helper.waitForExit() == 0, "\(helper.errorOutput)") }

            #expect(!watchdog.fired)
            #expect(storage.integer(forKey: "counter") == 2_000)
            let dump = try Helper.run(["dump", directory.path, "store"])
            #expect(dump.output == [#"{"key":"counter","value":2000}"#], "\(dump.errors)")
        }
    }

    @Test func fourProcessesUpdatingOneCodableValueFiveHundredTimesEachLoseNoUpdate() throws {
        try withTemporaryDirectory { directory throws in
            let watchdog = Watchdog()
            defer { watchdog.cancel() }
            let writers = (0..<4).map { "w\($0)" }
            let helpers = try startTogether(
                writers.map { ["update-tally", directory.path, "store", "tally", "500", $0, "--wait-for-go"] },
                watchdog: watchdog)
            // Each update returns the count it wrote: every count from 1 to 2000 exactly once.
            var countsByWriter: [String: [Int]] = [:]
            for (writer, helper) in zip(writers, helpers) {
                var counts: [Int] = []
                while let line = helper.readLine() {
                    let parts = line.split(separator: " ")
                    guard parts.count == 2, parts[0] == "count", let count = Int(parts[1]) else {
                        Issue.record("unexpected line from \(writer): \(line)")
                        continue
                    }
                    counts.append(count)
                }
                #expect(helper.waitForExit() == 0, "\(helper.errorOutput)")
                #expect(counts.count == 500, "\(writer)")
                #expect(counts == counts.sorted() && Set(counts).count == counts.count, "\(writer): \(counts)")
                countsByWriter[writer] = counts
            }
            #expect(!watchdog.fired)
            #expect(countsByWriter.values.flatMap { $0 }.sorted() == Array(1...2_000))

            let tally = try openStore(directory).retrieveOrThrow(type: Tally.self, forKey: "tally")
            let lastWriter = countsByWriter.first { $0.value.last == 2_000 }?.key ?? "<nobody wrote 2000>"
            #expect(
                tally
                    == Tally(
                        count: 2_000, byWriter: Dictionary(uniqueKeysWithValues: writers.map { ($0, 500) }),
                        last: "\(lastWriter):2000"))
        }
    }

    // MARK: Reads after another process's commit

    @Test func aProcessThatOpenedTheStoreEarlierReadsEachCommitRightAfterItReturned() throws {
        try withTemporaryDirectory { directory throws in
            let watchdog = Watchdog()
            defer { watchdog.cancel() }
            let storage = openStore(directory)
            try storage.storeOrThrow(0, forKey: "k")
            try storage.storeOrThrow(0, forKey: "other")
            let reader = watchdog.guarding(
                try HelperProcess(["read-on-request", directory.path, "store"], withInput: true))
            #expect(reader.readLine() == "ready", "\(reader.errorOutput)")
            func read(_ key: String) throws -> String? {
                try reader.send(key)
                return reader.readLine()
            }
            #expect(try read("k") == "value k 0")

            // Every kind of commit, and now and then a compaction, which makes the reader reload.
            for value in 1...200 {
                switch value % 4 {
                case 0: try storage.storeOrThrow(value, forKey: "k")
                case 1: try storage.bulkStoreOrThrow(items: ["k": value, "other": value])
                case 2: try storage.update("k", as: Int.self) { $0 = value }
                default: #expect(try storage.incrementIntegerOrThrow(forKey: "k") == value)
                }
                if value.isMultiple(of: 25) { try storage.compactNow() }
                #expect(try read("k") == "value k \(value)", "\(reader.errorOutput)")
            }
            #expect(try read("other") == "value other 197")
            storage.remove(key: "k")
            #expect(try read("k") == "value k nil")
            storage.reset()
            #expect(try read("other") == "value other nil")
            #expect(!watchdog.fired)
        }
    }

    @Test func thisProcessReadsEachCommitOfAnotherProcessOnceItsCallReturned() throws {
        try withTemporaryDirectory { directory throws in
            let watchdog = Watchdog()
            defer { watchdog.cancel() }
            let storage = openStore(directory)
            try storage.storeOrThrow(0, forKey: "k")
            #expect(storage.integer(forKey: "k") == 0)  // cached before the other process writes

            let writer = watchdog.guarding(
                try HelperProcess(["store-range", directory.path, "store", "k", "1", "300"]))
            var acknowledged = 0
            var lastSeen = 0
            while let line = writer.readLine() {
                guard let value = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else {
                    Issue.record("unexpected line: \(line)")
                    continue
                }
                acknowledged = value
                // The writer may have committed more since; it cannot have committed less.
                let seen = storage.retrieve(type: Int.self, forKey: "k") ?? -1
                #expect(seen >= value, "commit \(value) had returned, but this process read \(seen)")
                #expect(seen >= lastSeen, "reads went backwards: \(lastSeen) then \(seen)")
                lastSeen = seen
            }
            #expect(writer.waitForExit() == 0, "\(writer.errorOutput)")
            #expect(acknowledged == 300)
            #expect(storage.integer(forKey: "k") == 300)
        }
    }

    // MARK: Notifications across processes

    @Test func anObserverInAnotherProcessHearsEachCommitOnceWithItsKeysAndWriteID() throws {
        try withTemporaryDirectory { directory throws in
            let watchdog = Watchdog()
            defer { watchdog.cancel() }
            let storage = openStore(directory)
            try storage.storeOrThrow(1, forKey: "same")
            let observer = watchdog.guarding(try HelperProcess(["observe", directory.path, "store"], withInput: true))
            #expect(observer.readLine() == "ready", "\(observer.errorOutput)")

            var expected: [String] = []
            func commit(_ keys: [String], _ body: (String) throws -> Void) rethrows {
                let writeID = UUID().uuidString
                try body(writeID)
                expected.append(changeLine(keys: keys, writeID: writeID))
            }
            try commit(["a"]) { try storage.storeOrThrow("x", forKey: "a", writeID: $0) }
            try commit(["b"]) { try storage.storeOrThrow(2, forKey: "b", writeID: $0) }
            try commit(["c", "d"]) { try storage.bulkStoreOrThrow(items: ["c": 1, "d": 2], writeID: $0) }
            try commit(["b"]) { try storage.incrementIntegerOrThrow(forKey: "b", writeID: $0) }
            try commit(["c"]) { try storage.update("c", as: Int.self, writeID: $0) { $0 = ($0 ?? 0) + 10 } }
            commit(["a"]) { storage.remove(key: "a", writeID: $0) }
            try storage.storeOrThrow(4, forKey: "b")
            expected.append(changeLine(keys: ["b"], writeID: nil))

            // Writes that change no bytes, here and in a third process: nothing to announce.
            try storage.storeOrThrow(1, forKey: "same", writeID: UUID().uuidString)
            storage.remove(key: "missing", writeID: UUID().uuidString)
            try storage.update("c", as: Int.self, writeID: UUID().uuidString) { $0 = 11 }
            try storage.bulkStoreOrThrow(items: ["d": 99], skipKeyIfAlreadyPresent: true, writeID: UUID().uuidString)
            let noOp = try Helper.run(["write", directory.path, "store", "same", "1"])
            #expect(noOp.status == 0, "\(noOp.errors)")

            // A third process's commit carries no writeID.
            let third = try Helper.run(["write", directory.path, "store", "e", "5"])
            #expect(third.status == 0, "\(third.errors)")
            expected.append(changeLine(keys: ["e"], writeID: nil))
            commit(["b", "c", "d", "e", "same"]) { storage.reset(writeID: $0) }
            try commit(["done"]) { try storage.storeOrThrow(true, forKey: "done", writeID: $0) }

            // Delivery is in commit order, so anything extra would show up before the last line.
            let lines = readLines(from: observer, count: expected.count)
            #expect(lines == expected, "\(observer.errorOutput)")
            #expect(observer.killHard() == [])
            #expect(!watchdog.fired)
        }
    }

    /// A store starts watching its files off the opening thread, a moment after it opened. Another
    /// process committing from that moment on is heard all the same, every commit once: the
    /// look that follows the start of the watch finds what was published before it.
    @Test func commitsAnotherProcessMakesRightAfterThisOneOpensAreEachAnnounced() throws {
        try withTemporaryDirectory { directory throws in
            let watchdog = Watchdog()
            defer { watchdog.cancel() }
            try openStore(directory).storeOrThrow(0, forKey: "k")
            let writer = watchdog.guarding(
                try HelperProcess(
                    ["store-range", directory.path, "store", "k", "1", "50", "--wait-for-go"], withInput: true))
            #expect(writer.readLine() == "ready", "\(writer.errorOutput)")

            // Opened, then the writer let go at once: nothing here reads or writes the store again.
            let storage = openStore(directory)
            let recorder = ChangeRecorder(storage)
            try writer.send("go")
            let acknowledged = readLines(from: writer, until: { _ in false }).map { line in
                let parts = line.split(separator: " ")
                return changeLine(keys: ["k"], writeID: parts.count == 3 ? String(parts[2]) : nil)
            }
            #expect(writer.waitForExit() == 0, "\(writer.errorOutput)")
            #expect(acknowledged.count == 50)
            #expect(recorder.lines.wait(forCount: 50) == acknowledged)
            #expect(!watchdog.fired)
            withExtendedLifetime(storage) {}
        }
    }

    @Test func observersInTwoProcessesHearTwoWriterProcessesCommitsOnceEachInTheSameOrder() throws {
        try withTemporaryDirectory { directory throws in
            let watchdog = Watchdog()
            defer { watchdog.cancel() }
            let storage = openStore(directory)
            let recorder = ChangeRecorder(storage)
            let observer = watchdog.guarding(try HelperProcess(["observe", directory.path, "store"], withInput: true))
            #expect(observer.readLine() == "ready", "\(observer.errorOutput)")

            let keys = ["x", "y"]
            let writers = try startTogether(
                keys.map { ["store-range", directory.path, "store", $0, "1", "200", "--wait-for-go"] },
                watchdog: watchdog)
            var acknowledged: [String: [String]] = [:]
            for (key, writer) in zip(keys, writers) {
                acknowledged[key] = readLines(from: writer, until: { _ in false }).map { line in
                    let parts = line.split(separator: " ")
                    return changeLine(keys: [key], writeID: parts.count == 3 ? String(parts[2]) : nil)
                }
                #expect(writer.waitForExit() == 0, "\(writer.errorOutput)")
                #expect(acknowledged[key]?.count == 200)
            }

            let remote = readLines(from: observer, count: 400)
            let local = recorder.lines.wait(forCount: 400)
            #expect(remote.count == 400, "\(observer.errorOutput)")
            // One commit order, seen identically by every process.
            #expect(remote == local)
            for key in keys {
                #expect(remote.filter { $0.hasPrefix("change \(key) ") } == acknowledged[key])
            }
            #expect(observer.killHard() == [])
            #expect(!watchdog.fired)
        }
    }

    @Test func aValueStreamYieldsTheCurrentValueThenEveryValueAnotherProcessStores() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("TinyStorageIntegrationTests-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = openStore(directory)
        try storage.storeOrThrow(0, forKey: "k")
        let stream = storage.values(forKey: "k", as: Int.self)
        let writer = try HelperProcess(["store-range", directory.path, "store", "k", "1", "50"])

        let values = await collect(stream, count: 51, seconds: 60)
        #expect(values == Array(0...50))
        #expect(writer.waitForExit() == 0, "\(writer.errorOutput)")
    }

    // MARK: Compaction

    @Test func compactionInOneProcessWhileOthersReadAndWriteLosesNothing() throws {
        try withTemporaryDirectory { directory throws in
            let watchdog = Watchdog(seconds: 300)
            defer { watchdog.cancel() }
            let storage = openStore(directory)
            let preserved = Dictionary(
                uniqueKeysWithValues: (0..<300).map { ("p\($0)", String(repeating: "value \($0) ", count: 6)) })
            try storage.bulkStoreOrThrow(items: preserved.mapValues { $0 as any Encodable })

            let compactor = watchdog.guarding(
                try HelperProcess(["compact-until-stopped", directory.path, "store"], withInput: true))
            #expect(compactor.readLine() == "started", "\(compactor.errorOutput)")
            let reader = watchdog.guarding(
                try HelperProcess(["read-on-request", directory.path, "store"], withInput: true))
            #expect(reader.readLine() == "ready", "\(reader.errorOutput)")
            let workers = try startTogether(
                [
                    ["increment", directory.path, "store", "counter", "500", "--wait-for-go"],
                    ["increment", directory.path, "store", "counter", "500", "--wait-for-go"],
                    ["update-tally", directory.path, "store", "tally", "300", "u", "--wait-for-go"],
                ], watchdog: watchdog)

            // Meanwhile this process writes, reads its writes back, and asks the reader process.
            var lastCounter = 0
            for value in 1...300 {
                let key = "t\(value % 30)"
                try storage.storeOrThrow(value, forKey: key)
                #expect(try storage.retrieveOrThrow(type: Int.self, forKey: key) == value)
                let counter = storage.integer(forKey: "counter")
                #expect(counter >= lastCounter, "the counter went back from \(lastCounter) to \(counter)")
                lastCounter = counter
                let preservedKey = "p\(value % 300)"
                #expect(try storage.retrieveOrThrow(type: String.self, forKey: preservedKey) == preserved[preservedKey])
                if value.isMultiple(of: 10) {
                    try reader.send(key)
                    #expect(reader.readLine() == "value \(key) \(value)", "\(reader.errorOutput)")
                }
            }
            for worker in workers { #expect(worker.waitForExit() == 0, "\(worker.errorOutput)") }
            try compactor.send("stop")
            let summary = compactor.readLine() ?? ""
            #expect(compactor.waitForExit() == 0, "\(compactor.errorOutput)")
            let compactions = Int(summary.split(separator: " ").last ?? "") ?? 0
            #expect(summary.hasPrefix("compacted ") && compactions >= 2, "\(summary)")
            #expect(try headerGeneration(storage.fileURL) > UInt64(compactions))

            // Every value, seen by this process, a new instance, and a new process.
            for view in [storage, openStore(directory)] {
                #expect(view.integer(forKey: "counter") == 1_000)
                #expect(view.retrieve(type: Tally.self, forKey: "tally")?.count == 300)
                #expect(view.retrieve(type: Tally.self, forKey: "tally")?.byWriter == ["u": 300])
                for value in 271...300 { #expect(view.integer(forKey: "t\(value % 30)") == value) }
                for (key, text) in preserved { #expect(view.retrieve(type: String.self, forKey: key) == text) }
            }
            var expected = Set(preserved.map { #"{"key":"\#($0.key)","value":"\#($0.value)"}"# })
            for value in 271...300 { expected.insert(#"{"key":"t\#(value % 30)","value":\#(value)}"#) }
            expected.insert(#"{"key":"counter","value":1000}"#)
            let dump = try Helper.run(["dump", directory.path, "store"])
            #expect(dump.status == 0, "\(dump.errors)")
            #expect(Set(dump.output.filter { !$0.hasPrefix(#"{"key":"tally""#) }) == expected)
            try reader.send("counter")
            #expect(reader.readLine() == "value counter 1000")
            #expect(!watchdog.fired)
        }
    }
}

/// The first `count` elements of `stream`, or fewer when `seconds` pass first (a hang guard).
func collect<Element: Sendable>(_ stream: AsyncStream<Element>, count: Int, seconds: Double) async -> [Element] {
    let arrivals = Arrivals<Element>()
    await withTaskGroup(of: Void.self) { group in
        group.addTask {
            for await element in stream {
                arrivals.append(element)
                if arrivals.all.count == count { return }
            }
        }
        group.addTask { try? await Task.sleep(for: .seconds(seconds)) }
        await group.next()
        group.cancelAll()
    }
    return arrivals.all
}
