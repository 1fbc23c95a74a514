import Foundation
import Testing

@testable import TinyStorage

/// A fault that tests switch on and off while a store is open.
final class FaultSwitch: Sendable {
    /// NB: the rule is kept in a class. A function type stored directly in a `Locked` grows a
    /// reabstraction thunk on every `withLock`, until a long test overflows the stack.
    private final class Rule: Sendable {
        let decide: @Sendable (FileIO.Call, String?) -> FileIO.Fault?
        init(_ decide: @escaping @Sendable (FileIO.Call, String?) -> FileIO.Fault?) { self.decide = decide }
    }

    private let rule = Locked<Rule?>(nil)
    private let hits = Locked<[FileIO.Call: Int]>([:])

    /// A `FileIO` whose calls consult this switch.
    var io: FileIO {
        FileIO { [self] call, path in
            guard let fault = rule.withLock({ $0 })?.decide(call, path) else { return nil }
            hits.withLock { $0[call, default: 0] += 1 }
            return fault
        }
    }

    /// Injects `fault` into every `call` from now on.
    func inject(_ fault: FileIO.Fault, into call: FileIO.Call) {
        rule.withLock { $0 = Rule { candidate, _ in candidate == call ? fault : nil } }
    }

    /// Injects faults chosen by `rule` from now on.
    func inject(_ rule: @escaping @Sendable (FileIO.Call, String?) -> FileIO.Fault?) {
        self.rule.withLock { $0 = Rule(rule) }
    }

    func clear() { rule.withLock { $0 = nil } }

    /// How many faults were injected into `call`.
    func count(_ call: FileIO.Call) -> Int { hits.withLock { $0[call] ?? 0 } }
}

/// Failures of the file system are reported with the right code and never damage what was stored.
@Suite struct FaultInjectionTests {
    @Test(arguments: [
        (FileIO.Fault.fail(.noSpace), TinyStorageError.Code.noSpace),
        (.fail(.quotaExceeded), .noSpace),
        (.fail(.ioError), .io),
        (.fail(.readOnlyFileSystem), .permissionDenied),
        (.shortWrite(bytes: 5, then: .noSpace), .noSpace),
        (.shortWrite(bytes: 0, then: .noSpace), .noSpace),
        (.shortWrite(bytes: 12, then: nil), .io),
    ])
    func aFailedAppendLeavesThePreviousValueInMemoryAndOnDisk(
        fault: FileIO.Fault, code: TinyStorageError.Code
    ) throws {
        // NB: appends by `pwrite`, as on Apple platforms: on Linux a commit copies its record into
        // a mapping, which cannot fail (see the allocation tests below).
        let options = Engine.Options(usesFileLock: true)
        func openStore(_ directory: URL, io: FileIO = .system) -> TinyStorage {
            TinyStorageTests.openStore(directory, io: io, options: options)
        }
        try withTemporaryDirectory { directory throws in
            let faults = FaultSwitch()
            let storage = openStore(directory, io: faults.io)
            try storage.storeOrThrow("previous", forKey: "k")
            try storage.storeOrThrow(1, forKey: "other")
            let bytes = try Data(contentsOf: storage.fileURL)

            faults.inject(fault, into: .write)
            let error = expectError(code) { try storage.storeOrThrow("next", forKey: "k") }
            #expect(error?.code == code)
            expectError(code) { try storage.storeOrThrow(2, forKey: "new") }
            expectError(code) { try storage.storeOrThrow(nil, forKey: "other") }
            expectError(code) { try storage.bulkStoreOrThrow(items: ["k": "bulk", "new": 1]) }
            expectError(code) { try storage.incrementIntegerOrThrow(forKey: "other") }
            expectError(code) { try storage.resetOrThrow() }
            storage.store("ignored", forKey: "k")
            storage.remove(key: "other")
            #expect(faults.count(.write) >= 7)

            // Nothing changed: in memory, on disk (byte for byte), and for a new instance.
            #expect(storage.retrieve(type: String.self, forKey: "k") == "previous")
            #expect(storage.integer(forKey: "other") == 1)
            #expect(!storage.contains("new"))
            #expect(try Data(contentsOf: storage.fileURL) == bytes)
            #expect(openStore(directory).retrieve(type: String.self, forKey: "k") == "previous")

            // Once the disk works again, so does the store, and the log is still well-formed.
            faults.clear()
            try storage.storeOrThrow("next", forKey: "k")
            #expect(storage.integer(forKey: "other") == 1)
            let reopened = openStore(directory)
            #expect(reopened.retrieve(type: String.self, forKey: "k") == "next")
            #expect(reopened.integer(forKey: "other") == 1)
            #expect(quarantineFiles(of: reopened).isEmpty)
        }
    }

    /// Linux: a commit copies its record into a mapping of space allocated ahead of it
    /// (`posix_fallocate`, see ``AppendMapping/allocatedSize(through:)``). When the disk has no
    /// room for more, the commit that needs it fails before anything is copied: every entry
    /// point throws, nothing changes in memory or in the log, and once the space is there
    /// commits go on.
    @Test(
        .enabled(if: isLinux, "only Linux appends through a mapping"),
        arguments: [
            (FileIO.Call.allocate, Errno.noSpace, TinyStorageError.Code.noSpace),
            (.allocate, .quotaExceeded, .noSpace),
            (.allocate, .ioError, .io),
        ])
    func aCommitThatCannotMakeRoomFailsAndChangesNothing(
        call: FileIO.Call, error: Errno, code: TinyStorageError.Code
    ) throws {
        try withTemporaryDirectory { directory throws in
            let faults = FaultSwitch()
            let storage = openStore(directory, io: faults.io)
            try storage.storeOrThrow("previous", forKey: "k")
            try storage.storeOrThrow(1, forKey: "other")
            // Nearly fills the space first allocated (64 KiB), so that the next commit needs more.
            #expect(try fileSize(storage.fileURL) == AppendMapping.granularity)
            let filler = String(repeating: "f", count: AppendMapping.granularity - 2_000)
            try storage.storeOrThrow(filler, forKey: "filler")
            let committed = try committedLength(storage.fileURL)
            let bytes = try Data(contentsOf: storage.fileURL).prefix(committed)
            let big = String(repeating: "b", count: 4_000)

            faults.inject(.fail(error), into: call)
            expectError(code) { try storage.storeOrThrow(big, forKey: "k") }
            expectError(code) { try storage.bulkStoreOrThrow(items: ["k": big, "new": 1]) }
            expectError(code) { try storage.update("k", as: String.self) { $0 = big } }
            storage.store(big, forKey: "k")
            #expect(faults.count(call) >= 4)

            #expect(storage.retrieve(type: String.self, forKey: "k") == "previous")
            #expect(!storage.contains("new"))
            #expect(try committedLength(storage.fileURL) == committed)
            #expect(try Data(contentsOf: storage.fileURL).prefix(committed) == bytes)
            #expect(openStore(directory).retrieve(type: String.self, forKey: "k") == "previous")

            faults.clear()
            try storage.storeOrThrow(big, forKey: "k")
            try storage.storeOrThrow(2, forKey: "other")
            let reopened = openStore(directory)
            #expect(reopened.retrieve(type: String.self, forKey: "k") == big)
            #expect(reopened.integer(forKey: "other") == 2)
            let size = try fileSize(storage.fileURL)
            let log = try committedLength(storage.fileURL)
            #expect(size % AppendMapping.granularity == 0 && size > log, "\(size) bytes for a log of \(log)")
            #expect(reopened.recoveryReports.isEmpty && quarantineFiles(of: reopened).isEmpty)
        }
    }

    /// Linux: the first commit of a store instance maps the data file (see `AppendMapping`).
    /// When the process has no address space for it (`ENOMEM`), that commit fails before
    /// anything is written, through every entry point, and the next one maps the file.
    @Test(.enabled(if: isLinux, "only Linux appends through a mapping"))
    func aCommitThatCannotMapTheFileFailsAndChangesNothing() throws {
        try withTemporaryDirectory { directory throws in
            try openStore(directory).storeOrThrow("previous", forKey: "k")
            let faults = FaultSwitch()
            let storage = openStore(directory, io: faults.io)
            #expect(storage.retrieve(type: String.self, forKey: "k") == "previous")
            let committed = try committedLength(storage.fileURL)

            faults.inject(.fail(Errno(ENOMEM)), into: .map)
            expectError(.io) { try storage.storeOrThrow("next", forKey: "k") }
            expectError(.io) { try storage.bulkStoreOrThrow(items: ["k": "next", "new": 1]) }
            expectError(.io) { try storage.update("k", as: String.self) { $0 = "next" } }
            #expect(storage.retrieve(type: String.self, forKey: "k") == "previous")
            #expect(!storage.contains("new"))
            #expect(try committedLength(storage.fileURL) == committed)

            faults.clear()
            try storage.storeOrThrow("next", forKey: "k")
            #expect(openStore(directory).retrieve(type: String.self, forKey: "k") == "next")
        }
    }

    /// Linux: where the process cannot have the address space a mapping reserves (`ENOMEM`,
    /// `ulimit -v`), the data file is mapped at its length instead, and mapped again each time the
    /// log outgrows it: commits go on, and everything reads back.
    @Test(.enabled(if: isLinux, "only Linux appends through a mapping"))
    func withoutAddressSpaceToReserveTheFileIsMappedAtItsLength() throws {
        try withTemporaryDirectory { directory throws in
            let faults = FaultSwitch()
            let storage = openStore(directory, io: faults.io)
            #expect(storage.integer(forKey: "k") == 0)  // opened: the lock file's page is mapped
            let refused = Locked(false)
            faults.inject { call, _ in
                guard call == .map else { return nil }
                // NB: only the first: the reservation is refused, the file's length is not.
                return refused.withLock { done in
                    defer { done = true }
                    return done ? nil : .fail(Errno(ENOMEM))
                }
            }
            let value = String(repeating: "r", count: 20_000)
            try storeNumbered(value, count: 20, in: storage)

            #expect(faults.count(.map) == 1)
            #expect(try fileSize(storage.fileURL) > 4 * AppendMapping.granularity)
            expectNumbered(value, at: [0, 19], in: directory)
        }
    }

    /// Faulting in the pages ahead of the log is only a head start (see
    /// `AppendMapping.prepare(ahead:)`): when the kernel refuses it (older than Linux 5.14:
    /// `EINVAL`), commits write the pages themselves, and nothing is lost or reported.
    @Test(.enabled(if: isLinux, "only Linux appends through a mapping"))
    func aRefusedPrefaultChangesNothing() throws {
        try withTemporaryDirectory { directory throws in
            let faults = FaultSwitch()
            faults.inject(.fail(Errno(EINVAL)), into: .prefault)
            let logger = TestLogger()
            let storage = openStore(directory, io: faults.io, logger: logger)
            let value = String(repeating: "z", count: 300)
            try storeNumbered(value, count: 1_000, in: storage)
            AppendMapping.waitForPreparedPages()

            #expect(faults.count(.prefault) >= 3)
            #expect(logger.texts(atLeast: .warning).isEmpty)
            let reopened = expectNumbered(value, at: [0, 500, 999], in: directory)
            #expect(reopened.recoveryReports.isEmpty)
        }
    }

    @Test func aFailingReadOnOpenMakesTheStoreUnavailableUntilItSucceeds() throws {
        try withTemporaryDirectory { directory throws in
            do {
                let storage = openStore(directory)
                try storage.storeOrThrow(364, forKey: "streak")
            }
            let bytes = try Data(contentsOf: directory.appendingPathComponent("store/store.tinystorage"))
            let faults = FaultSwitch()
            faults.inject(.fail(.ioError), into: .read)
            let storage = openStore(directory, io: faults.io)

            let reason = try #require(unavailabilityError(storage))
            #expect(reason.code == .io)
            // G1: never a made-up answer. G2: writes are refused and the file is untouched.
            expectError(.unavailable) { try storage.retrieveOrThrow(type: Int.self, forKey: "streak") }
            expectError(.unavailable) { try storage.storeOrThrow(1, forKey: "streak") }
            expectError(.unavailable) { try storage.incrementIntegerOrThrow(forKey: "streak") }
            expectError(.unavailable) { try storage.resetOrThrow() }
            #expect(storage.retrieve(type: Int.self, forKey: "streak") == nil)
            #expect(storage.incrementInteger(forKey: "streak") == TinyStorage.incrementFailed)
            #expect(try Data(contentsOf: storage.fileURL) == bytes)

            faults.clear()
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
            #expect(storage.availability.isAvailable)
            #expect(storage.incrementInteger(forKey: "streak") == 365)
        }
    }

    @Test func aFailingReadWhileCatchingUpNeverAnswersWithStaleData() throws {
        try withTemporaryDirectory { directory throws in
            let faults = FaultSwitch()
            let reader = openStore(directory, io: faults.io)
            let writer = openStore(directory)
            try writer.storeOrThrow(1, forKey: "k")
            #expect(try reader.retrieveOrThrow(type: Int.self, forKey: "k") == 1)

            // The reader learns that another instance committed but cannot read the commit: it
            // must say so rather than answer the old value (G1, G5).
            faults.inject(.fail(.ioError), into: .read)
            try writer.storeOrThrow(2, forKey: "k")
            expectError(.unavailable) { try reader.retrieveOrThrow(type: Int.self, forKey: "k") }
            expectError(.unavailable) { try reader.storeOrThrow(3, forKey: "k") }
            expectError(.unavailable) { try reader.incrementIntegerOrThrow(forKey: "k") }
            #expect(reader.retrieve(type: Int.self, forKey: "k") == nil)
            #expect(writer.integer(forKey: "k") == 2)

            faults.clear()
            #expect(try reader.retrieveOrThrow(type: Int.self, forKey: "k") == 2)
            try reader.storeOrThrow(3, forKey: "k")
            #expect(writer.integer(forKey: "k") == 3)
        }
    }

    /// A compaction that failed (a full disk, here its rename) is tried again once the log has
    /// grown by ``Engine/compactionRequestInterval``: every commit used to start another rewrite
    /// of the whole store, each failing the same way.
    @Test func aFailingCompactionIsTriedAgainOncePerIntervalOfLog() throws {
        try withTemporaryDirectory { directory throws in
            let faults = FaultSwitch()
            let storage = openStore(directory, io: faults.io, logger: TestLogger())
            faults.inject(.fail(.noSpace), into: .rename)
            let filler = String(repeating: "f", count: 4 << 10)
            var commits = 0
            while faults.count(.rename) == 0 {
                try #require(commits < 1_000, "compaction was never attempted")
                try storage.storeOrThrow("\(commits)" + filler, forKey: "filler")
                commits += 1
                Engine.waitForBackgroundCompactions()
            }
            // 64 records of 4 KiB after the first attempt: four intervals of log, so at most four
            // more attempts (every commit made one before).
            for round in 0..<64 {
                try storage.storeOrThrow("\(round)" + filler, forKey: "filler")
                Engine.waitForBackgroundCompactions()
            }
            #expect(faults.count(.rename) <= 1 + 64 * filler.utf8.count / Engine.compactionRequestInterval)
            #expect(faults.count(.rename) > 1, "never tried again")
            #expect(storage.retrieve(type: String.self, forKey: "filler") == "63" + filler)
        }
    }

    @Test func aFailedCompactionKeepsEveryValueAndTheStoreWorking() throws {
        try withTemporaryDirectory { directory throws in
            let faults = FaultSwitch()
            let logger = TestLogger()
            let storage = openStore(directory, io: faults.io, logger: logger)
            try storage.storeOrThrow("keep me", forKey: "small")
            let generation = try headerGeneration(storage.fileURL)
            faults.inject(.fail(.noSpace), into: .rename)
            let filler = String(repeating: "f", count: 16 << 10)
            for round in 0..<100 { try storage.storeOrThrow("\(round)" + filler, forKey: "filler") }
            Engine.waitForBackgroundCompactions()
            #expect(faults.count(.rename) > 0, "compaction was never attempted")
            #expect(try headerGeneration(storage.fileURL) == generation)
            #expect(!FileManager.default.fileExists(atPath: storage.fileURL.path + ".compacting"))
            #expect(!logger.texts(atLeast: .warning).isEmpty, "a failed compaction must be reported")

            // NB: a commit asks again once the log has grown by `compactionRequestInterval`.
            faults.clear()
            for round in 0...(Engine.compactionRequestInterval / filler.utf8.count) {
                try storage.storeOrThrow("\(round)" + filler, forKey: "filler")
            }
            try storage.storeOrThrow("last" + filler, forKey: "filler")
            Engine.waitForBackgroundCompactions()
            #expect(try headerGeneration(storage.fileURL) > generation)
            let reopened = openStore(directory)
            #expect(reopened.retrieve(type: String.self, forKey: "small") == "keep me")
            #expect(reopened.retrieve(type: String.self, forKey: "filler") == "last" + filler)
        }
    }
}
