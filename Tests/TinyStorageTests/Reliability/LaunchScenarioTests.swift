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

/// Issue 4's scenario in-process, through fault injection, so it runs on any machine (the same
/// scenario with real permissions and an unprivileged process is `NeverClobberTests` in the
/// integration tests): the store holds `streak = 364`, the app launches while the data file cannot
/// be opened (`EACCES`), and its launch code runs. The file must still say 364, and the same
/// instance must recover by itself once the file can be opened again, without a reopen.
@Suite struct LaunchScenarioTests {
    /// The app's launch code, exactly as issue 4 writes it.
    func launch(_ storage: TinyStorage) {
        let s = storage.retrieve(type: Int.self, forKey: "streak") ?? 0
        storage.store(s + 1, forKey: "streak")
    }

    @Test func aLaunchThatCannotOpenTheFileLeavesTheStreakAndRecoversOnTheNextAccess() throws {
        try withTemporaryDirectory { directory throws in
            let fileURL = try makeStore(in: directory, values: [("streak", 364)])
            let bytes = try Data(contentsOf: fileURL)
            let before = try snapshot(of: directory)

            let faults = FaultSwitch()
            faults.inject(failing(.open, .accessDenied, pathEndingIn: "/store.tinystorage"))
            let logger = TestLogger()
            let storage = openStore(directory, io: faults.io, logger: logger)
            launch(storage)

            // G1: the store said it could not answer, and why; it never answered 0.
            let reason = try #require(unavailabilityError(storage))
            #expect(reason.code == .permissionDenied, "\(reason)")
            let thrown = expectError(.unavailable) { try storage.retrieveOrThrow(type: Int.self, forKey: "streak") }
            #expect((thrown?.underlying as? TinyStorageError)?.code == .permissionDenied)
            expectError(.unavailable) { try storage.storeOrThrow(1, forKey: "streak") }
            #expect(logger.texts(atLeast: .error).contains { $0.contains("unavailable") })
            // G2: the launch's write of 1 was refused; not a byte changed, no file appeared.
            #expect(try Data(contentsOf: fileURL) == bytes)
            #expect(try snapshot(of: directory) == before)
            #expect(try openStore(directory).retrieveOrThrow(type: Int.self, forKey: "streak") == 364)

            // The file can be opened again: the same instance answers on its next access.
            faults.clear()
            launch(storage)
            #expect(storage.availability.isAvailable)
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 365)
            #expect(try openStore(directory).retrieveOrThrow(type: Int.self, forKey: "streak") == 365)
            #expect(storage.recoveryReports.isEmpty)
        }
    }

    /// The store's file watch runs on a virtual clock: every look the store starts by itself
    /// (at once and later, after its failed open) runs, and fails, while the file still cannot
    /// be opened. Then the file can be, and nothing is scheduled: only the file event of its
    /// permissions being set again can make the store look, and open.
    @Test(.timeLimit(.minutes(1)))
    func anUnavailableStoreRecoversOnAFileEventWithoutAnyAccess() async throws {
        try await withScratchDirectory { directory in
            let fileURL = try makeStore(in: directory, values: [("streak", 364)])
            let faults = FaultSwitch()
            faults.inject(failing(.open, .accessDenied, pathEndingIn: "/store.tinystorage"))
            let clock = VirtualScheduler()
            var options = Engine.Options()
            options.changeScheduler = clock
            let storage = openStore(directory, io: faults.io, options: options)
            // While the store is unavailable, the stream yields nothing (absence is never invented)…
            let values = storage.values(forKey: "streak", as: Int.self)
            clock.runAll()
            let failedOpens = faults.count(.open)
            #expect(failedOpens >= 2, "the store looked again by itself")
            #expect(clock.isIdle)
            faults.clear()
            // …and once the file is readable, a file event (here: its permissions are set again) is
            // enough for the store to open, with nobody calling it.
            #expect(chmod(fileURL.path, 0o600) == 0)
            try #require(clock.waitForWork(), "the file event never reached the store's watch")
            clock.advance()
            var iterator = values.makeAsyncIterator()
            #expect(await iterator.next() == .some(364))
            #expect(storage.availability.isAvailable)
        }
    }
}
