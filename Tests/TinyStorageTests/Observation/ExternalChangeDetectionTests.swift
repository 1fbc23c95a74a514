import Foundation
import Testing

@testable import TinyStorage

/// SPEC G6 with real stores: another instance's commit is announced even when the file event it
/// caused is handled before the commit is published, and commits a compaction hides are each
/// announced with their writeID. (The watcher's logic itself, driven by scripted event sources
/// on a virtual clock, is in `ChangeWatcherTests`.)
///
/// A commit appends its record (a file event on Apple platforms; Linux watches no writes), then
/// bumps the shared counter in the lock file's mapped page, then signals (a futex on Linux). A writer
/// descheduled between append and publish, on a loaded machine or an app suspended by the system,
/// leaves observers that handled the event with nothing new to see: the later looks and the
/// signal after the publish are what bring it.
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
            let coordination = try engine.state.withLock { (state) throws(TinyStorageError) in
                try engine.withFileLock(&state) { (state) throws(TinyStorageError) -> CoordinationFile in
                    guard let file = state.dataFile, let coordination = state.coordination else {
                        throw TinyStorageError(.unavailable, "The writer's store is not open.")
                    }
                    let record = LogCommit(
                        writeID: writeID, sequence: state.logSequence + 1,
                        operations: [.put(key: "k", value: Data("1".utf8))]
                    ).encoded()
                    let written = record.withUnsafeBytes { engine.io.write(file.fd, $0, at: state.end) }
                    #expect((try? written.get()) != nil)
                    // NB: not a wait for anything: this models the writer losing the CPU between its
                    // append and its publish, after the append's file event was handled.
                    Thread.sleep(forTimeInterval: 0.25)
                    state.end += record.count
                    state.logSequence += 1
                    state.seenSequence = coordination.publish(generation: state.generation, length: state.end)
                    return coordination
                }
            }
            // As `Engine.commit` does once the lock is released. NB: on Linux this signal is what
            // brings the commit (the folder's watch ignores writes); elsewhere the file event and
            // the later looks it starts.
            coordination.signalChange()

            // Nobody touches `observed`: only its file watch (and its later looks) can bring it.
            #expect(
                log.received.wait(forCount: 1, seconds: 5) == [Announcement(["k"], writeID)],
                "the commit was never announced to the other instance")
            #expect(observed.integer(forKey: "k") == 1)
        }
    }

    /// A writer stopped between its append and its publish for longer than every later look a
    /// file event starts (2 s): its commit is announced all the same, because the publish itself
    /// is signalled (the futex in the shared page on Linux), whenever it happens.
    @Test(.enabled(if: isLinux, "the direct signal is Linux's; Apple platforms rely on file events"))
    func aWriterStoppedLongerThanTheLaterLooksIsAnnouncedWhenItPublishes() throws {
        try withTemporaryDirectory { directory throws in
            let observed = openStore(directory)
            let writer = openStore(directory)
            try writer.storeOrThrow(0, forKey: "k")
            #expect(observed.integer(forKey: "k") == 0)
            let log = AnnouncementLog(observed)

            let writeID = UUID().uuidString
            let engine = writer.engine
            let coordination = try engine.state.withLock { (state) throws(TinyStorageError) in
                try engine.withFileLock(&state) { (state) throws(TinyStorageError) -> CoordinationFile in
                    guard let file = state.dataFile, let coordination = state.coordination else {
                        throw TinyStorageError(.unavailable, "The writer's store is not open.")
                    }
                    let record = LogCommit(
                        writeID: writeID, sequence: state.logSequence + 1,
                        operations: [.put(key: "k", value: Data("1".utf8))]
                    ).encoded()
                    let written = record.withUnsafeBytes { engine.io.write(file.fd, $0, at: state.end) }
                    #expect((try? written.get()) != nil)
                    // NB: not a wait for anything: this models the writer losing the CPU between its
                    // append and its publish for longer than every later look the append started.
                    Thread.sleep(forTimeInterval: 2.5)
                    state.end += record.count
                    state.logSequence += 1
                    state.seenSequence = coordination.publish(generation: state.generation, length: state.end)
                    return coordination
                }
            }
            coordination.signalChange()  // as `Engine.commit` does once the lock is released

            #expect(
                log.received.wait(forCount: 1, seconds: 5) == [Announcement(["k"], writeID)],
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
            let received = log.received.wait(until: { Set($0.flatMap(\.keys)) == ["a", "b", "gone"] }, seconds: 10)
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
