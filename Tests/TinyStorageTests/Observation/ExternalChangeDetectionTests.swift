import Foundation
import Testing

@testable import TinyStorage

/// Issue 3 item 3 (SPEC G6): another process's commit is announced even when the file event it
/// caused is handled before the commit is published.
///
/// A commit appends its record (a file event) and then bumps the shared counter in the lock
/// file's mapped page (no file event). A writer descheduled between the two, on a loaded machine
/// or an app suspended by the system, leaves observers that handled the event with nothing new to
/// see, and no later event to look again.
@Suite struct ExternalChangeDetectionTests {
    @Test func aCommitPublishedLongAfterItsAppendIsStillAnnounced() throws {
        try withTemporaryDirectory { directory throws in
            let observed = openStore(directory)
            let writer = openStore(directory)
            try writer.storeOrThrow(0, forKey: "k")
            #expect(observed.integer(forKey: "k") == 0)
            let log = AnnouncementLog(observed)

            // What `Engine.commit` does, with the writer held between the append and the publish.
            let writeID = UUID().uuidString
            let engine = writer.engine
            try engine.state.withLock { (state) throws(TinyStorageError) in
                try engine.withFileLock(&state) { (state) throws(TinyStorageError) in
                    guard let file = state.dataFile, let coordination = state.coordination else {
                        throw TinyStorageError(.unavailable, "The writer's store is not open.")
                    }
                    let record = LogCommit(writeID: writeID, operations: [.put(key: "k", value: Data("1".utf8))])
                        .encoded()
                    let written = record.withUnsafeBytes { engine.io.write(file.fd, $0, at: state.end) }
                    #expect((try? written.get()) != nil)
                    // NB: not a wait for anything: this models the writer losing the CPU between its
                    // append and its publish for longer than the change monitor takes to handle the
                    // append's event and look once more (2 ms later).
                    Thread.sleep(forTimeInterval: 0.25)
                    state.end += record.count
                    state.seenSequence = coordination.publish(generation: state.generation, length: state.end)
                }
            }

            // Nobody touches `observed`: only its file watch (and its later looks) can bring it.
            #expect(
                log.received.wait(forCount: 1, seconds: 5) == [Announcement(["k"], writeID)],
                "the commit was never announced to the other instance")
            #expect(observed.integer(forKey: "k") == 1)
        }
    }

    /// Records when a change monitor asks its listener to look (monotonic nanoseconds).
    final class LookRecorder: FileChangeListener {
        let looks = Arrivals<UInt64>()
        func filesDidChange() { looks.append(DispatchTime.now().uptimeNanoseconds) }
    }

    /// The monitor's later looks (`ChangeMonitor.lateLookDelays`) run as one chain at a time. A
    /// writer that appends shortly before a chain's last look and publishes shortly after it must
    /// still be looked at again: the event during the chain makes another chain follow it.
    ///
    /// A monitor of its own watches the directory, so no other test's file events start chains.
    @Test func aWriterStalledAcrossTheLastLateLookIsLookedAtAgain() throws {
        try withTemporaryDirectory { directory throws in
            let file = directory.appendingPathComponent("data")
            try Data().write(to: file)
            let handle = try FileHandle(forUpdating: file)
            defer { try? handle.close() }
            func append() throws {
                try handle.seekToEnd()
                try handle.write(contentsOf: Data("record".utf8))
            }
            let monitor = ChangeMonitor()
            let recorder = LookRecorder()
            let watch = monitor.watch(directoryPath: directory.path, dataFilePath: file.path, listener: recorder)
            #expect(watch != nil)

            // One commit: its event starts a chain of later looks, the last one 2 s later.
            try append()
            let chainStart = try #require(recorder.looks.wait(forCount: 1).first)
            let lastLook = chainStart + 2_000_000_000
            #expect(ChangeMonitor.lateLookDelays.last == .seconds(2))
            // NB: not waits for anything: they model a writer whose next append comes 0.1 s before
            // that last look, and which then loses the CPU for 0.5 s before it bumps the shared
            // counter (no event). The margins exceed any timer leeway.
            Thread.sleep(forTimeInterval: Double(lastLook - 100_000_000 - DispatchTime.now().uptimeNanoseconds) / 1e9)
            try append()
            Thread.sleep(forTimeInterval: 0.5)
            let published = DispatchTime.now().uptimeNanoseconds

            // A look after `published` finds the commit; without one, it is never announced.
            let looks = recorder.looks.wait(until: { $0.contains { $0 > published } }, seconds: 5)
            #expect(looks.contains { $0 > published }, "no look after the publish (\(looks.count) looks)")
            withExtendedLifetime(watch) {}
        }
    }

    /// While a chain of later looks runs, another event starts no chain of its own: its only look
    /// of its own is the one 2 ms later. A writer that commits 0.6 s after another commit and is
    /// descheduled for 10 ms before bumping the counter is seen only at the running chain's next
    /// look, 1.4 s later, where G6 promises 50 ms. Under CPU contention the benchmark
    /// `g notification latency` shows such notifications arriving after more than a second.
    @Test func aWriterStalledBrieflyWhileAChainRunsIsLookedAtBeforeTheChainEnds() throws {
        try withTemporaryDirectory { directory throws in
            let file = directory.appendingPathComponent("data")
            try Data().write(to: file)
            let handle = try FileHandle(forUpdating: file)
            defer { try? handle.close() }
            func append() throws {
                try handle.seekToEnd()
                try handle.write(contentsOf: Data("record".utf8))
            }
            let monitor = ChangeMonitor()
            let recorder = LookRecorder()
            let watch = monitor.watch(directoryPath: directory.path, dataFilePath: file.path, listener: recorder)
            #expect(watch != nil)

            // One commit starts a chain (looks 20 ms, 100 ms, 500 ms and 2 s later).
            try append()
            let chainStart = try #require(recorder.looks.wait(forCount: 1).first)
            // NB: not waits for anything: they model the next commit 0.6 s later, whose writer
            // loses the CPU for 10 ms between its append and its counter bump (no event).
            let next = chainStart + 600_000_000
            Thread.sleep(forTimeInterval: Double(next - min(next, DispatchTime.now().uptimeNanoseconds)) / 1e9)
            try append()
            Thread.sleep(forTimeInterval: 0.01)
            let published = DispatchTime.now().uptimeNanoseconds

            // NB: not a timing assertion: any look of this commit's own must come before the
            // running chain's last look (2 s after it started), here 1.3 s after the publish.
            let chainLastLook = chainStart + 1_900_000_000
            let looks = recorder.looks.wait(until: { $0.contains { $0 > published } }, seconds: 5)
            let firstAfter = looks.first { $0 > published }
            // FIXME: remove `withKnownIssue` once a look (or a file event) follows every counter bump.
            withKnownIssue("a commit published more than 2 ms after its event, during a chain, waits for the chain") {
                #expect(
                    firstAfter.map { $0 < chainLastLook } == true,
                    "the first look after the publish came only with the chain's last look")
            }
            withExtendedLifetime(watch) {}
        }
    }

    /// Later looks end 2 s after the last event. A writer stopped for longer between its append
    /// and its counter bump (a `kill -STOP`, a debugger, a machine under memory pressure) is never
    /// looked at again, and other processes hear of its commit only when they next use the store.
    /// A file event made after the counter bump (for example a one-byte `pwrite` to the lock file)
    /// would close this for good.
    @Test func aWriterStoppedLongerThanTheLateLooksIsLookedAtAgain() throws {
        try withTemporaryDirectory { directory throws in
            let file = directory.appendingPathComponent("data")
            try Data().write(to: file)
            let handle = try FileHandle(forUpdating: file)
            defer { try? handle.close() }
            let monitor = ChangeMonitor()
            let recorder = LookRecorder()
            let watch = monitor.watch(directoryPath: directory.path, dataFilePath: file.path, listener: recorder)
            #expect(watch != nil)

            try handle.seekToEnd()
            try handle.write(contentsOf: Data("record".utf8))
            _ = recorder.looks.wait(forCount: 1)
            // NB: models the writer being stopped for 2.5 s before it bumps the counter (no event).
            Thread.sleep(forTimeInterval: 2.5)
            let published = DispatchTime.now().uptimeNanoseconds

            let looks = recorder.looks.wait(until: { $0.contains { $0 > published } }, seconds: 3)
            // FIXME: remove `withKnownIssue` once a file event follows every counter bump.
            withKnownIssue("a writer stopped for more than 2 s between append and publish is never announced") {
                #expect(looks.contains { $0 > published }, "no look after the publish (\(looks.count) looks)")
            }
            withExtendedLifetime(watch) {}
        }
    }

    /// Holds `storage`'s engine lock while `body` runs, so its file watch cannot catch up meanwhile.
    func holdingBack(_ storage: TinyStorage, _ body: () throws -> Void) rethrows {
        try storage.engine.state.withLock { _ in try body() }
    }

    @Test func commitsHiddenByAnotherInstancesCompactionAreStillAnnouncedAndApplied() throws {
        try withTemporaryDirectory { directory throws in
            let observed = openStore(directory)
            let writer = openStore(directory)
            try writer.storeOrThrow(0, forKey: "a")
            try writer.storeOrThrow(0, forKey: "gone")
            #expect(observed.integer(forKey: "a") == 0)
            let log = AnnouncementLog(observed)
            let generation = try headerGeneration(writer.fileURL)

            // The observer lags behind while the writer commits, then compacts the file.
            var expected: [Announcement] = []
            try holdingBack(observed) {
                for (key, value) in [("a", 1), ("b", 2), ("a", 3)] {
                    let writeID = UUID().uuidString
                    try writer.storeOrThrow(value, forKey: key, writeID: writeID)
                    expected.append(Announcement([key], writeID))
                }
                let writeID = UUID().uuidString
                writer.remove(key: "gone", writeID: writeID)
                expected.append(Announcement(["gone"], writeID))
                try writer.compactNow()
            }
            #expect(try headerGeneration(writer.fileURL) > generation)

            // Every changed key is announced and every value is right.
            let received = log.received.wait(until: { Set($0.flatMap(\.keys)) == ["a", "b", "gone"] }, seconds: 10)
            #expect(Set(received.flatMap(\.keys)) == ["a", "b", "gone"])
            #expect(observed.integer(forKey: "a") == 3)
            #expect(observed.integer(forKey: "b") == 2)
            #expect(!observed.contains("gone"))

            // FIXME: the observer reloads the compacted file and announces the difference once,
            // without writeIDs. Its open descriptor still reads the old file, which holds every one
            // of these commits: applying that tail before reloading would announce each of them.
            withKnownIssue("commits hidden by a compaction are announced as one change without writeIDs") {
                #expect(received == expected)
            }
        }
    }
}
