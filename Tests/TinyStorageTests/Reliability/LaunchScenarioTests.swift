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

    @Test(.timeLimit(.minutes(1)))
    func anUnavailableStoreRecoversOnAFileEventWithoutAnyAccess() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("TinyStorageTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let fileURL = try makeStore(in: directory, values: [("streak", 364)])

        let faults = FaultSwitch()
        faults.inject(failing(.open, .accessDenied, pathEndingIn: "/store.tinystorage"))
        let storage = openStore(directory, io: faults.io)
        // While the store is unavailable, the stream yields nothing (absence is never invented)…
        let values = storage.values(forKey: "streak", as: Int.self)
        faults.clear()
        // …and once the file is readable, a file event (here: its permissions are set again) is
        // enough for the store to open, with nobody calling it.
        #expect(chmod(fileURL.path, 0o600) == 0)
        var iterator = values.makeAsyncIterator()
        let first = await iterator.next()
        #expect(first == .some(364))
        #expect(storage.availability.isAvailable)
    }
}
