import Foundation
import Testing

@testable import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Durable commits that wait while a flush runs share the next flush (issue 11's group commit).
/// NB: a time limit per test: a regression here waits forever (a spin or a `for await` on a
/// marker that never comes), and should fail the test, not stall the run (tests-audit N11).
@Suite(.timeLimit(.minutes(1))) struct GroupCommitTests {
    /// Counts flushes and holds the first one until the test lets it go.
    final class FlushGate: Sendable {
        private let state = Locked((flushes: 0, released: false))

        var io: FileIO {
            FileIO { [self] call, path in
                guard call == .sync, path == nil else { return nil }
                let first = state.withLock { state in
                    state.flushes += 1
                    return state.flushes == 1
                }
                if first { while !state.withLock({ $0.released }) { sched_yield() } }
                return nil
            }
        }

        var flushes: Int { state.withLock { $0.flushes } }
        func release() { state.withLock { $0.released = true } }
    }

    /// A data file of 400 zero bytes named `data` in `directory`, flushed through `io`. (The
    /// `DataFile` owns the descriptor; the directory's is closed here.)
    func makeDataFile(in directory: URL, io: FileIO) throws -> DataFile {
        let folder = try FileIO.system.openDirectory(atPath: directory.path).get()
        defer { _ = FileIO.system.close(folder.fd) }
        let fd = try FileIO.system.open(in: folder, "data", flags: O_RDWR | O_CREAT).get()
        try [UInt8](repeating: 0, count: 400).withUnsafeBytes { try FileIO.system.write(fd, $0, at: 0).get() }
        return DataFile(fd: fd, io: io)
    }

    /// Starts a thread that flushes `file` through `end`, as a durable commit does, and leaves
    /// `group` when it returns.
    func syncOnAThread(
        _ file: DataFile, through end: Int, in group: DispatchGroup,
        appendedThrough: @escaping @Sendable () -> Int = { 0 }, gather: @escaping @Sendable () -> Void = {}
    ) {
        group.enter()
        Thread {
            #expect(throws: Never.self) {
                try file.sync(through: end, appendedThrough: appendedThrough, gather: gather)
            }
            group.leave()
        }.start()
    }

    /// Commit A's flush is under way when commits B and C finish writing and ask for theirs: one
    /// more flush covers both. Before, each flush covered only its caller, so C flushed again.
    @Test func commitsWaitingForAFlushShareTheNextOne() throws {
        try withTemporaryDirectory { directory throws in
            let gate = FlushGate()
            let file = try makeDataFile(in: directory, io: gate.io)
            let done = DispatchGroup()
            syncOnAThread(file, through: 100, in: done)  // A: its flush waits at the gate, holding the others back
            while gate.flushes == 0 { sched_yield() }
            syncOnAThread(file, through: 200, in: done)  // B
            syncOnAThread(file, through: 300, in: done)  // C
            while file.announcedEnd < 300 { sched_yield() }  // both registered, both waiting
            gate.release()
            done.wait()
            #expect(gate.flushes == 2, "A's flush, then one for B and C together")
        }
    }

    /// A flush covers every commit appended before it began, also one whose thread has not come
    /// to ask for a flush yet (the threads a flush wakes commit again at once): that commit then
    /// needs no flush of its own.
    @Test func aFlushCoversCommitsAppendedBeforeItBegan() throws {
        try withTemporaryDirectory { directory throws in
            let gate = FlushGate()
            let file = try makeDataFile(in: directory, io: gate.io)
            let appended = Locked(100)
            let done = DispatchGroup()
            let appendedThrough = { @Sendable in appended.withLock { $0 } }
            syncOnAThread(file, through: 100, in: done, appendedThrough: appendedThrough)  // A: held at the gate
            while gate.flushes == 0 { sched_yield() }
            syncOnAThread(file, through: 200, in: done, appendedThrough: appendedThrough)  // B waits for A's flush
            while file.announcedEnd < 200 { sched_yield() }
            appended.withLock { $0 = 400 }  // C appended, not asking yet
            gate.release()
            done.wait()
            #expect(gate.flushes == 2, "A's flush, then B's")
            try file.sync(through: 400) { appended.withLock { $0 } }  // C
            #expect(gate.flushes == 2, "B's flush began after C's append, so it covered C")
        }
    }

    /// A flush whose turn has come waits for a durable commit on its way (begun, not yet
    /// appended) and covers it: the threads a flush wakes commit again at once, and the first to
    /// ask for a flush no longer takes it alone.
    @Test func aFlushWaitsForACommitOnItsWayAndCoversIt() throws {
        try withTemporaryDirectory { directory throws in
            let gate = FlushGate()
            let file = try makeDataFile(in: directory, io: gate.io)
            // NB: a long wait, so only the commit's arrival can end it within the test.
            let window = DurableCommitWindow(longestWait: 30)
            let appended = Locked(100)
            let done = DispatchGroup()
            let appendedThrough = { @Sendable in appended.withLock { $0 } }
            let gather = { @Sendable in window.gather() }
            syncOnAThread(file, through: 100, in: done, appendedThrough: appendedThrough, gather: gather)  // A: held
            while gate.flushes == 0 { sched_yield() }
            let commitC = window.enter()  // C begins a durable commit
            syncOnAThread(file, through: 200, in: done, appendedThrough: appendedThrough, gather: gather)  // B: waits
            while file.announcedEnd < 200 { sched_yield() }
            gate.release()
            // NB: the 30 seconds only keep a broken build from hanging here.
            let giveUp = DispatchTime.now() + 30
            while !window.isGathering, DispatchTime.now() < giveUp { sched_yield() }
            #expect(window.isGathering, "B's flush began without waiting for C")
            appended.withLock { $0 = 400 }  // C appends…
            commitC.leave()  // …and says so: B's flush begins
            done.wait()
            try file.sync(through: 400) { appended.withLock { $0 } }  // C asks for its flush
            #expect(gate.flushes == 2, "A's flush, then one for B and C together")
        }
    }

    /// A commit whose bytes a finished flush already covers returns, and records the durable
    /// mark, without waiting for a flush under way for later commits. Before, both waited for it
    /// (the mark behind the flush lock), so concurrent durable commits paid for about two flushes
    /// each.
    @Test func aCoveredCommitDoesNotWaitForTheFlushUnderWay() throws {
        try withTemporaryDirectory { directory throws in
            let held = HeldFlush()
            let file = try makeDataFile(in: directory, io: held.io)
            try file.sync(through: 100)

            held.hold()
            let flusher = DispatchSemaphore(value: 0)
            Thread {
                #expect(throws: Never.self) { try file.sync(through: 300) }
                flusher.signal()
            }.start()
            held.waitUntilHeld()  // the flush for bytes up to 300 is inside `fdatasync`
            let finished = held.finishesWhileHeld {
                #expect(throws: Never.self) { try file.sync(through: 100) }
                #expect(throws: Never.self) { try file.recordDurableMark(through: 100, flushesLater: false).get() }
            }
            #expect(finished, "a covered commit waited for the flush under way")
            flusher.wait()
        }
    }
}
