import Dispatch
import Foundation
import Testing

@testable import TinyStorage

/// `Locked`, the in-process lock every store's state is behind: off Apple platforms it is our own
/// futex word, so its contended path (mark the word waited for, sleep, be woken) is tested here
/// rather than trusted.
/// NB: a time limit per test: a regression here waits forever (a spin or a `for await` on a
/// marker that never comes), and should fail the test, not stall the run (tests-audit N11).
@Suite(.timeLimit(.minutes(1))) struct LockedTests {
    /// Two fields written together, so a reader that ever sees them differ saw a torn update.
    struct Pair {
        var first = 0
        var second = 0
    }

    @Test func threadsContendingForTheLockLoseNoUpdateAndNeverSeeAHalfWrittenState() {
        let locked = Locked(Pair())
        let torn = Locked(0)
        let threads = 8
        let increments = 20_000
        // NB: more threads than the machine has cores, each taking the lock again at once, so some
        // find it held and sleep on it: a wake-up lost by the unlock would hang this test.
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for _ in 0..<increments {
                let consistent = locked.withLock { pair in
                    let consistent = pair.first == pair.second
                    pair.first += 1
                    pair.second += 1
                    return consistent
                }
                if !consistent { torn.withLock { $0 += 1 } }
            }
        }
        let pair = locked.withLock { $0 }
        #expect(pair.first == threads * increments)
        #expect(pair.second == threads * increments)
        #expect(torn.withLock { $0 } == 0)
    }

    /// The holder lets go only once the waiter has marked the lock waited for (off Apple
    /// platforms, where that can be seen; `os_unfair_lock`'s waiters cannot), so the waiter
    /// sleeps and must be woken: a lost wake-up fails the wait below instead of passing.
    @Test func aThreadWaitingForTheLockRunsOnceTheHolderReleasesIt() {
        let locked = Locked<[String]>([])
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let waiterDone = DispatchSemaphore(value: 0)
        Thread {
            locked.withLock { order in
                order.append("holder")
                holding.signal()
                release.wait()  // holds the lock until the waiter waits for it
            }
        }.start()
        holding.wait()
        Thread {
            locked.withLock { $0.append("waiter") }
            waiterDone.signal()
        }.start()
        #if !canImport(Darwin)
        while !locked.hasWaiter { sched_yield() }
        #endif
        release.signal()
        #expect(waiterDone.wait(timeout: .now() + 30) == .success, "the waiter was never woken")
        #expect(locked.withLock { $0 } == ["holder", "waiter"])
    }

    /// A lock with no state (`Locked(())`, a plain mutex such as `ChangeWatcher.starting`) taken
    /// by one thread while another comes for it. Without ThreadSanitizer there is nothing to see;
    /// under it (CI's sanitizer lane), the holder's `inout` access to the empty state, which lies
    /// over the object's header, was reported as racing with the other thread's read of that
    /// header before it locks. NB: the other thread learns that the lock is held from the lock
    /// word alone, which orders nothing, so a race would not be hidden by a handshake.
    @Test(.enabled(if: Self.holderIsVisible, "os_unfair_lock does not show whether it is held"))
    func aLockWithNoStateTakenWhileAnotherThreadComesForItIsNoRace() {
        #if !canImport(Darwin)
        let locked = Locked(())
        let done = DispatchGroup()
        done.enter()
        Thread {
            locked.withLock { _ in
                while !locked.hasWaiter { sched_yield() }
            }
            done.leave()
        }.start()
        done.enter()
        Thread {
            while !locked.isHeld { sched_yield() }
            locked.withLock { _ in }
            done.leave()
        }.start()
        #expect(done.wait(timeout: .now() + 30) == .success, "a thread never got the lock")
        #endif
    }

    #if canImport(Darwin)
    static let holderIsVisible = false
    #else
    static let holderIsVisible = true
    #endif
}
