import Foundation
import Testing

@testable import TinyStorage

/// SPEC G6 with real stores: another instance's commit is announced even when the observer looked
/// between its append and its publish, and commits a compaction hides are each announced with
/// their writeID. (The watcher's logic itself, driven by scripted event sources on a virtual
/// clock, is in `ChangeWatcherTests`.)
///
/// A commit appends its record (a file event on Apple platforms; Linux watches no writes), then
/// bumps the shared counter in the lock file's mapped page, then signals (a futex on Linux). A writer
/// descheduled between append and publish, on a loaded machine or an app suspended by the system,
/// leaves observers that handled the event with nothing new to see: the later looks and the
/// signal after the publish are what bring it.
@Suite struct ExternalChangeDetectionTests {
    /// The observer's file watch runs on a virtual clock, so which of its looks ran before the
    /// writer published is decided by the test, not by a sleep: where commits are signalled
    /// (Linux), every look the observer has runs before the publish, and the signal brings the
    /// commit; where they are not (Apple platforms), the look that follows the append's file
    /// event runs before the publish, and a later look brings it.
    @Test(.timeLimit(.minutes(1)))
    func aCommitPublishedAfterTheObserverLookedIsStillAnnounced() throws {
        try withTemporaryDirectory { directory throws in
            let signalled = Platform.current.fileEvents == .namesAndSignal
            let writer = openStore(directory)
            try writer.storeOrThrow(0, forKey: "k")
            let clock = VirtualScheduler()
            var options = Engine.Options()
            options.changeScheduler = clock
            let observed = openStore(directory, options: options)
            #expect(observed.integer(forKey: "k") == 0)
            clock.runAll()
            #expect(clock.isIdle)
            let log = AnnouncementLog(observed)

            // What `Engine.commit` does, with the writer held between the append and the publish.
            let writeID = UUID().uuidString
            let engine = writer.engine
            let coordination = try engine.state.withLock { (state) throws(TinyStorageError) in
                try engine.withFileLock(&state) { (state) throws(TinyStorageError) -> CoordinationFile in
                    guard let file = state.log.dataFile, let coordination = state.coordination.file else {
                        throw TinyStorageError(.unavailable, "The writer's store is not open.")
                    }
                    let record = LogCommit(
                        writeID: writeID, sequence: state.log.sequence + 1,
                        operations: [.put(key: "k", value: Data("1".utf8))]
                    ).encoded()
                    let written = record.withUnsafeBytes { engine.io.write(file.fd, $0, at: state.log.end) }
                    #expect((try? written.get()) != nil)
                    // The writer loses the CPU here; the observer looks meanwhile.
                    if signalled {
                        clock.runAll()
                    } else {
                        #expect(clock.waitForWork(), "the append's file event never reached the observer")
                        clock.advance()
                    }
                    #expect(log.delivered.isEmpty, "announced before it was published")
                    state.log.appendedRecord(ofSize: record.count)
                    state.log.sequence += 1
                    state.coordination.seenSequence = coordination.publish(
                        generation: state.log.generation, length: state.log.end)
                    return coordination
                }
            }
            // As `Engine.commit` does once the lock is released: on Linux this signal is what
            // brings the commit; elsewhere it only moves a counter.
            coordination.signalChange()
            if signalled {
                try #require(clock.waitForWork(), "the signal never reached the observer")
                clock.advance()
            } else {
                clock.advance(by: ChangeWatcher.lateLookDelays[0])
            }

            // Nobody touches `observed`: only its file watch can bring the commit.
            #expect(
                log.received.wait(forCount: 1, seconds: 30) == [Announcement(["k"], writeID)],
                "the commit was never announced to the other instance")
            #expect(observed.integer(forKey: "k") == 1)
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
            let received = log.received.wait(until: { Set($0.flatMap(\.keys)) == ["a", "b", "gone"] })
            #expect(Set(received.flatMap(\.keys)) == ["a", "b", "gone"])
            #expect(observed.integer(forKey: "a") == 3)
            #expect(observed.integer(forKey: "b") == 2)
            #expect(!observed.contains("gone"))

            // Each commit is announced on its own, with its writeID: the observer reads the old
            // file's last commits through its open descriptor before it reads the compacted file.
            #expect(received == expected)
        }
    }
}
