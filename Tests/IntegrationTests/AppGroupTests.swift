import Foundation
import Testing
import TinyStorage

/// Issue 10 with real processes, as an app and its extensions share a store: a listener keeps
/// hearing other processes after the data file was replaced under it (compaction) and after the
/// store reopened through a read (defect 1), and no `update` closure or logger call runs while a
/// store lock is held, in any process (defects 4 and 5).
@Suite struct AppGroupTests {
    /// The reproduction from the issue: another process stores a 100 kB value 60 times (the log
    /// passes its 1 MiB compaction threshold several times, so the data file is replaced under the
    /// listener), then one small final value. A listener that only reacts to notifications hears
    /// the final write.
    @Test func aListenerHearsTheLastWriteAfterAnotherProcessCompacted() throws {
        try withTemporaryDirectory { directory throws in
            let listener = openStore(directory)
            try listener.storeOrThrow(0, forKey: "start")
            let generation = try headerGeneration(listener.fileURL)
            let recorder = ChangeRecorder(listener)

            let writer = try Helper.run(["store-large", directory.path, "store", "big", "100000", "60", "final"])
            #expect(writer.status == 0, "\(writer.errors)")
            #expect(writer.output == ["done"])

            let heard = recorder.lines.wait(until: { $0.contains { changeLine($0, names: "final") } }, seconds: 30)
            #expect(
                heard.contains { changeLine($0, names: "final") },
                "the final write was never announced: \(heard.suffix(3))")
            #expect(
                try headerGeneration(listener.fileURL) > generation, "no compaction happened: the test proves nothing")
            #expect(listener.integer(forKey: "final") == 1)
        }
    }

    /// The same with the listener in another process and the compactions made here.
    @Test func aListenerProcessHearsTheLastWriteAfterThisProcessCompacted() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow(0, forKey: "start")
            let watchdog = Watchdog(seconds: 60)
            defer { watchdog.cancel() }
            let listener = watchdog.guarding(try HelperProcess(["observe", directory.path, "store"], withInput: true))
            #expect(listener.readLine() == "ready")
            let big = String(repeating: "x", count: 100_000)
            for round in 0..<30 { try storage.storeOrThrow(big + "\(round)", forKey: "big") }
            try storage.compactNow()
            try storage.storeOrThrow(1, forKey: "final")

            let lines = readLines(from: listener, until: { changeLine($0, names: "final") })
            #expect(
                lines.last.map { changeLine($0, names: "final") } == true,
                "the final write was never announced: \(lines)")
            _ = listener.killHard()
        }
    }

    /// The store cannot open (something that is not its file is where its data file belongs),
    /// then a read reopens it once it can: from then on it hears other processes' commits.
    @Test func aStoreReopenedThroughAReadKeepsHearingOtherProcesses() throws {
        try withTemporaryDirectory { directory throws in
            let folder = directory.appendingPathComponent("store", isDirectory: true)
            let blocker = folder.appendingPathComponent("store.tinystorage", isDirectory: true)
            try FileManager.default.createDirectory(at: blocker, withIntermediateDirectories: true)
            let listener = openStore(directory)
            #expect(!listener.availability.isAvailable)
            let recorder = ChangeRecorder(listener)

            try FileManager.default.removeItem(at: blocker)
            #expect(try listener.retrieveOrThrow(type: Int.self, forKey: "k") == nil)  // reopens
            let writer = try Helper.run(["write", directory.path, "store", "k", "7"])
            #expect(writer.status == 0, "\(writer.errors)")

            let heard = recorder.lines.wait(until: { $0.contains { $0.hasPrefix("change k ") } }, seconds: 30)
            #expect(heard.contains { $0.hasPrefix("change k ") }, "heard: \(heard)")
            #expect(listener.integer(forKey: "k") == 7)
        }
    }

    /// Two processes run updates, durable commits, compactions and logged failures on one store;
    /// each checks, from inside, that no closure and no logger call ran under a store lock, and
    /// says how many it checked: at least every round's closure and every failed encode's log.
    @Test func noClosureOrLoggerCallRunsUnderALockInAnyProcess() throws {
        try withTemporaryDirectory { directory throws in
            let rounds = 60
            let workers = try (0..<2).map { _ in
                try HelperProcess(["lock-contract", directory.path, "store", "\(rounds)"])
            }
            for worker in workers {
                #expect(worker.readLine() == "violations 0 0", "\(worker.errorOutput)")
                let ran = worker.readLine()?.split(separator: " ").dropFirst().compactMap { Int($0) } ?? []
                #expect(ran.count == 2, "\(worker.errorOutput)")
                #expect(ran.first ?? 0 >= rounds, "update closures checked: \(ran)")
                #expect(ran.last ?? 0 >= rounds / 10, "logger calls checked: \(ran)")
                #expect(worker.waitForExit() == 0)
            }
            #expect(openStore(directory).integer(forKey: "counter") == 2 * rounds)
        }
    }
}
