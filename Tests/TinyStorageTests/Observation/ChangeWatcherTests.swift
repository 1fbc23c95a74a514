import Foundation
import Testing

@testable import TinyStorage

/// The change watcher's shared logic (issue 10), driven by scripted event sources on a virtual
/// clock: the same code runs behind inotify and the futex signal on Linux and behind kqueue vnode
/// sources on Apple platforms, so the event orders each platform produces are replayed here.
@Suite struct ChangeWatcherTests {
    /// A watcher over `sources` whose looks are logged on a virtual clock.
    func makeWatcher(
        _ sources: [any ChangeEventSource], finding: LookFinding = .unsettled
    ) -> (ChangeWatcher, VirtualScheduler, LookLog) {
        let scheduler = VirtualScheduler()
        let log = LookLog(scheduler)
        let watcher = ChangeWatcher(sources: sources, scheduler: scheduler) {
            log.look()
            return finding
        }
        watcher.start()
        scheduler.advance()
        return (watcher, scheduler, log)
    }

    static let laterLooks: [Duration] = [.milliseconds(20), .milliseconds(100), .milliseconds(500), .seconds(2)]

    @Test func aFileEventIsLookedAtAtOnceAndAgainLater() {
        let source = ScriptedSource()
        let (watcher, scheduler, log) = makeWatcher([source])
        #expect(ChangeWatcher.lateLookDelays == Self.laterLooks)

        #expect(source.emit(.activity))
        scheduler.runAll()
        // At once (a writer that already published), then later (one that had not yet).
        #expect(log.looks == [.zero] + Self.laterLooks)
        withExtendedLifetime(watcher) {}
    }

    /// Issue 28, D10: a file event whose look finds every append published (this process's own
    /// commit, on Apple platforms, where every commit makes one) needs no later looks: one
    /// wake-up, not five. Names changed still start a chain.
    @Test func aFileEventWhoseLookFindsTheFileSettledIsLookedAtOnce() {
        let source = ScriptedSource()
        let (watcher, scheduler, log) = makeWatcher([source], finding: .settled)
        source.emit(.activity)
        scheduler.runAll()
        #expect(log.looks == [.zero])
        source.emit(.namesChanged)
        scheduler.runAll()
        let afterNames = Array(log.looks.dropFirst())
        #expect(afterNames.map { $0 - afterNames[0] } == [.zero] + Self.laterLooks)
        withExtendedLifetime(watcher) {}
    }

    @Test func aPublishSignalIsLookedAtOnceWithNoLaterLooks() {
        let source = ScriptedSource()
        let (watcher, scheduler, log) = makeWatcher([source])
        source.emit(.published)
        scheduler.runAll()
        #expect(log.looks == [.zero], "a signal comes after the publish: nothing can be missed later")
        withExtendedLifetime(watcher) {}
    }

    @Test func eventsArrivingBeforeALookShareIt() {
        let source = ScriptedSource()
        let (watcher, scheduler, log) = makeWatcher([source])
        for _ in 0..<50 { source.emit(.published) }
        scheduler.advance()
        #expect(log.looks == [.zero])
        withExtendedLifetime(watcher) {}
    }

    /// A writer appends (event) just before a chain's last look and publishes (no event, no
    /// signal: another tool, or an earlier version) just after it: the event during the chain
    /// starts another chain when it ends, so the last look always follows the last event by 2 s.
    @Test func anEventDuringAChainOfLaterLooksStartsAnotherChainAfterIt() {
        let source = ScriptedSource()
        let (watcher, scheduler, log) = makeWatcher([source])
        source.emit(.activity)
        scheduler.advance(by: .milliseconds(1_900))
        source.emit(.activity)
        scheduler.runAll()
        let afterSecond = log.looks.filter { $0 >= .milliseconds(1_900) }
        // Its own look at once, the first chain's last look, then a whole second chain.
        #expect(afterSecond == [.milliseconds(1_900), .seconds(2)] + Self.laterLooks.map { .seconds(2) + $0 })
        #expect(log.looks.last.map { $0 - .milliseconds(1_900) >= .seconds(2) } == true)
        withExtendedLifetime(watcher) {}
    }

    @Test func manyEventsDuringAChainStartOnlyOneMoreChain() {
        let source = ScriptedSource()
        let (watcher, scheduler, log) = makeWatcher([source])
        source.emit(.activity)
        for step in 1...10 {
            scheduler.advance(by: .milliseconds(150))
            source.emit(.activity)
            #expect(log.looks.count >= step)
        }
        scheduler.runAll()
        let chains = log.looks.filter { $0 > .milliseconds(1_500) }
        #expect(chains == [.seconds(2)] + Self.laterLooks.map { .seconds(2) + $0 })
        withExtendedLifetime(watcher) {}
    }

    /// Apple platforms: a compaction or repair renames a new file over the data file. The file's
    /// vnode source reports the rename (the watched file is gone) and the directory's source the
    /// new name; appends to the new file are only seen once the file source is re-armed.
    @Test func darwinLikeOrderARenamedDataFileIsRearmedAndItsAppendsLookedAt() {
        let file = ScriptedSource()
        let (watcher, scheduler, log) = makeWatcher([file])
        file.emit(.activity)  // an append to the old file
        file.emit(.namesChanged)  // NOTE_RENAME / NOTE_DELETE on the old file
        file.emit(.namesChanged)  // NOTE_WRITE on the directory: the new name
        scheduler.advance()
        #expect(file.rearms == 2, "the file source must be re-armed after each name change")
        #expect(log.looks == [.zero])
        scheduler.advance(by: .milliseconds(30))
        file.emit(.activity)  // an append to the new file, seen by the re-armed source
        scheduler.runAll()
        #expect(log.looks.contains(.milliseconds(30)))
        // The event came during the first chain, so another chain follows it: the last look is
        // at least 2 s after the last event.
        #expect(log.looks.last == .seconds(4))
        withExtendedLifetime(watcher) {}
    }

    /// Linux: the watched directory is removed or replaced (IN_DELETE_SELF, IN_IGNORED), which ends
    /// an inotify watch for good. The source is started again at the next look, and events on the
    /// new directory are looked at.
    @Test func inotifyLikeOrderALostDirectoryWatchIsStartedAgain() {
        let directory = ScriptedLosableSource()
        let signal = ScriptedSource()
        let (watcher, scheduler, log) = makeWatcher([directory, signal])
        #expect(directory.scripted.starts == 1 && signal.starts == 1)

        directory.emit(.activity)
        directory.emit(.lost)
        scheduler.advance()
        #expect(directory.scripted.stops >= 1)
        #expect(directory.scripted.starts == 2, "restarted at the look that followed")
        #expect(directory.scripted.isWatching)
        #expect(signal.starts == 1 && signal.stops == 0, "a source that lost nothing is left alone")
        #expect(log.looks == [.zero])
        scheduler.advance(by: .milliseconds(5))
        #expect(directory.emit(.namesChanged))
        scheduler.advance()
        #expect(log.looks == [.zero, .milliseconds(5)])
        withExtendedLifetime(watcher) {}
    }

    /// The signal source needs the store's shared page, which exists only once the store opens:
    /// a source that cannot start yet is started at a later look, or when the store asks again.
    @Test func aSourceThatCannotStartYetIsStartedLater() {
        let directory = ScriptedLosableSource()
        let signal = ScriptedSource(refusals: 2)
        let (watcher, scheduler, log) = makeWatcher([directory, signal])
        #expect(!signal.isWatching)

        directory.emit(.activity)  // the store's file appears: the look tries again
        scheduler.advance()
        #expect(signal.starts == 2 && !signal.isWatching)
        watcher.start()  // the store opened
        scheduler.advance()
        #expect(signal.isWatching)
        #expect(signal.emit(.published))
        scheduler.advance()
        #expect(log.looks.count == 2)
        withExtendedLifetime(watcher) {}
    }

    /// A store that has just opened starts its sources off the opening thread: nothing starts
    /// before the scheduler runs, and a look follows the start, so a commit published before the
    /// sources watched (it makes no event) is found by that look.
    @Test func aStartSoonStartsTheSourcesOnTheSchedulerThenLooks() {
        let directory = ScriptedLosableSource()
        let signal = ScriptedSource()
        let scheduler = VirtualScheduler()
        let watchingAtLooks = Locked<[Bool]>([])
        let watcher = ChangeWatcher(sources: [directory, signal], scheduler: scheduler) { () -> LookFinding in
            watchingAtLooks.withLock { $0.append(directory.scripted.isWatching && signal.isWatching) }
            return .unsettled
        }
        watcher.startSoon()
        #expect(directory.scripted.starts == 0 && signal.starts == 0, "started on the caller's thread")
        scheduler.advance()
        #expect(directory.scripted.starts == 1 && signal.starts == 1)
        #expect(watchingAtLooks.withLock { $0 } == [true], "one look, after every source started")
        #expect(signal.emit(.published))
        scheduler.advance()
        #expect(watchingAtLooks.withLock { $0 } == [true, true])
        #expect(directory.scripted.starts == 1 && signal.starts == 1, "each source started once")
        withExtendedLifetime(watcher) {}
    }

    @Test func aWatcherReleasedBeforeItsStartSoonRanStartsNothing() {
        let source = ScriptedSource()
        let scheduler = VirtualScheduler()
        let log = LookLog(scheduler)
        var watcher: ChangeWatcher? = ChangeWatcher(sources: [source], scheduler: scheduler) {
            log.look()
            return .unsettled
        }
        watcher?.startSoon()
        watcher = nil
        scheduler.runAll()
        #expect(source.starts == 0)
        #expect(log.looks.isEmpty)
        withExtendedLifetime(watcher) {}
    }

    /// Sources report from their own threads; the sink never blocks them nor calls back into
    /// them, so a source handling events on the watcher's queue (as Dispatch sources may) cannot
    /// deadlock or trap.
    @Test func eventsFromManyThreadsAtOnceAreAllHandled() {
        let source = ScriptedSource()
        let (watcher, scheduler, log) = makeWatcher([source])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<100 { source.emit(.published) }
        }
        scheduler.advance()
        #expect(log.looks == [.zero])
        withExtendedLifetime(watcher) {}
    }

    /// A store's first read and a look on the watcher's queue may start the idle sources at the
    /// same moment: each source is started once, never twice (a second start would leave the
    /// first one's watch registered forever).
    ///
    /// The first start stays inside until the second thread is seen either starting the same
    /// source (the overlap this forbids) or waiting for the watcher's start lock (off Apple
    /// platforms, where a lock's waiter can be seen; there, a spin window stands in).
    @Test func sourcesStartedFromManyThreadsAtOnceAreStartedOnce() {
        for _ in 0..<50 {
            let source = ScriptedSource()
            let watcher = ChangeWatcher(sources: [source], scheduler: VirtualScheduler(), look: { .settled })
            let arrived = Locked(0)
            let entered = Locked(0)
            source.duringStart = {
                guard
                    entered.withLock({
                        $0 += 1; return $0
                    }) == 1
                else { return }
                #if canImport(Darwin)
                while arrived.withLock({ $0 }) < 2 { sched_yield() }
                for _ in 0..<2_000 { sched_yield() }
                #else
                while entered.withLock({ $0 }) < 2, !watcher.starting.hasWaiter { sched_yield() }
                #endif
            }
            // NB: threads of their own: the first start waits for the second thread.
            let done = DispatchGroup()
            for _ in 0..<2 {
                done.enter()
                Thread {
                    arrived.withLock { $0 += 1 }
                    watcher.start()
                    done.leave()
                }.start()
            }
            done.wait()
            #expect(source.starts == 1)
            #expect(source.isWatching)
        }
    }

    @Test func aReleasedWatcherStopsItsSourcesAndSchedulesNothingMore() {
        let source = ScriptedSource()
        var (watcher, scheduler, log): (ChangeWatcher?, VirtualScheduler, LookLog) = makeWatcher([source])
        source.emit(.activity)
        scheduler.advance()
        watcher = nil
        #expect(source.stops == 1)
        scheduler.runAll()
        #expect(log.looks == [.zero], "later looks outlived the store")
        #expect(!source.emit(.activity))
        withExtendedLifetime(watcher) {}
    }
}

/// What a store's look tells its watcher about later looks (issue 28, D10), with Apple platforms'
/// decisions (vnode events, `pwrite` appends): settled after its own commits, unsettled while
/// bytes lie past its log. (Where commits are signalled, a look always leaves later looks be.)
@Suite struct LookFindingTests {
    @Test func aStoreIsSettledAfterItsOwnCommitsAndUnsettledWhileAnAppendIsUnpublished() throws {
        try withTemporaryDirectory { directory throws in
            var options = Engine.Options(watchesChanges: false)
            options.platform = .apple
            let storage = openStore(directory, options: options)
            for index in 0..<10 { try storage.storeOrThrow(index, forKey: "k") }
            #expect(storage.engine.filesDidChange() == .settled)
            // A writer between its append and its publish (here: killed there, as far as the file
            // shows): later looks may find more.
            try storage.engine.holdCommitLock(leaving: .tornRecord) {}
            #expect(storage.engine.filesDidChange() == .unsettled)
        }
    }
}
