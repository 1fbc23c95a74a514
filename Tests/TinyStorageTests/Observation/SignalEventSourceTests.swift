#if os(Linux) || os(Android)
import Foundation
import Testing

@testable import TinyStorage

/// The Linux writer→reader signal (a futex in the shared page).
@Suite struct SignalEventSourceTests {
    /// A commit signalled right after `start` returns — before the source's thread first runs —
    /// is reported: the source reads the signal on the caller's thread. (It read it on its own
    /// thread, so such a commit counted as seen and was never reported; a store then missed the
    /// first change another process made after it opened.)
    @Test func aSignalRightAfterStartIsReported() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory, options: Engine.Options(backgroundFlushes: false, watchesChanges: false))
            try storage.storeOrThrow(1, forKey: "a")
            let file = try #require(storage.engine.state.withLock { $0.coordination.file })
            for _ in 0..<5 {
                let looks = Locked(0)
                let scheduler = VirtualScheduler()
                let source = SignalEventSource(coordination: { file })
                let watcher = ChangeWatcher(sources: [source], scheduler: scheduler) { () -> LookFinding in
                    looks.withLock { $0 += 1 }
                    return .settled
                }
                watcher.start()
                file.signalChange()  // another process's commit, at once
                // NB: waits for the report from the source's thread; a missed one never comes.
                let deadline = Date().addingTimeInterval(10)
                while looks.withLock({ $0 }) == 0 && Date() < deadline {
                    scheduler.advance()
                    sched_yield()
                }
                #expect(looks.withLock { $0 } > 0, "the signal was missed")
                source.stop()
            }
        }
    }
}
#endif
