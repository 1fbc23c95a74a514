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

/// Issue 4's fault-injection matrix, for the cases `FaultInjectionTests` does not already cover:
/// each failing system call is reported with the right code, and the store's data on disk (raw
/// bytes and a fresh instance) and in memory (the same instance) is exactly what it was before.
@Suite struct FaultMatrixTests {
    // MARK: Opening

    struct OpenFault: Sendable, CustomTestStringConvertible {
        var call: FileIO.Call
        var error: Int32
        var pathSuffix: String?
        var code: TinyStorageError.Code

        var testDescription: String { "\(call) fails with \(Errno(error)) on \(pathSuffix ?? "any path")" }
    }

    static let openFaults = [
        OpenFault(call: .open, error: EACCES, pathSuffix: "/store.tinystorage", code: .permissionDenied),
        OpenFault(call: .open, error: EPERM, pathSuffix: "/store.tinystorage", code: .permissionDenied),
        OpenFault(call: .open, error: EIO, pathSuffix: "/store.tinystorage", code: .io),
        OpenFault(call: .open, error: EACCES, pathSuffix: "/store.lock", code: .permissionDenied),
        OpenFault(call: .open, error: EPERM, pathSuffix: "/store.lock", code: .permissionDenied),
        OpenFault(call: .read, error: EACCES, code: .permissionDenied),
        OpenFault(call: .read, error: EPERM, code: .permissionDenied),
        OpenFault(call: .stat, error: EIO, code: .io),
        OpenFault(call: .map, error: ENOMEM, code: .io),
        OpenFault(call: .stat, error: EACCES, pathSuffix: "/store", code: .permissionDenied),
    ]

    @Test(arguments: openFaults)
    func aFaultWhileOpeningMakesTheStoreUnavailableUntilItClears(fault: OpenFault) throws {
        try withTemporaryDirectory { directory throws in
            let fileURL = try makeStore(in: directory, values: streakValues)
            let stored = try openStore(directory).rawJSON()
            let bytes = try Data(contentsOf: fileURL)
            let faults = FaultSwitch()
            faults.inject(failing(fault.call, Errno(fault.error), pathEndingIn: fault.pathSuffix))
            let before = try snapshot(of: directory)

            let storage = openStore(directory, io: faults.io)
            let reason = try #require(unavailabilityError(storage))
            #expect(reason.code == fault.code, "\(reason)")
            let thrown = expectError(.unavailable) { try storage.retrieveOrThrow(type: Int.self, forKey: "streak") }
            #expect((thrown?.underlying as? TinyStorageError)?.code == fault.code)
            expectError(.unavailable) { try storage.storeOrThrow(1, forKey: "streak") }
            #expect(try snapshot(of: directory) == before)
            #expect(try Data(contentsOf: fileURL) == bytes)
            #expect(try openStore(directory).rawJSON() == stored)

            faults.clear()
            #expect(try storage.rawJSON() == stored)
            #expect(storage.recoveryReports.isEmpty)
        }
    }

    /// An existing store's folder is only looked at, never created again (no `mkdirat`), so a
    /// failure to create a folder can only meet a new store: it is unavailable with the error,
    /// nothing is created, and it opens once the fault clears.
    @Test func aFaultCreatingANewStoresFolderMakesItUnavailableUntilItClears() throws {
        try withTemporaryDirectory { directory throws in
            let faults = FaultSwitch()
            faults.inject(failing(.makeDirectory, Errno(EACCES), pathEndingIn: "/store"))
            let before = try snapshot(of: directory)

            let storage = openStore(directory, io: faults.io)
            let reason = try #require(unavailabilityError(storage))
            #expect(reason.code == .permissionDenied, "\(reason)")
            expectError(.unavailable) { try storage.storeOrThrow(1, forKey: "streak") }
            #expect(try snapshot(of: directory) == before)

            faults.clear()
            #expect(try storage.rawJSON().isEmpty)
            try storage.storeOrThrow(1, forKey: "streak")
            #expect(openStore(directory).integer(forKey: "streak") == 1)
        }
    }

    // MARK: Committing

    /// A commit that fails: the fault, the durability it runs with, the code it must report.
    struct CommitFault: Sendable, CustomTestStringConvertible {
        var name: String
        var durability: TinyStorage.Durability
        /// Whether the instance commits once successfully before the fault.
        var warmUp: Bool
        var faults: [FileIO.Call: FileIO.Fault]
        var code: TinyStorageError.Code
        /// Whether the store appends with `pwrite` (Apple platforms' path), where a write can fail
        /// halfway; on Linux it copies records into a mapping (`FaultInjectionTests` covers its
        /// allocation).
        var usesFileLock = true

        var testDescription: String { name }
    }

    static let commitFaults = [
        CommitFault(
            name: "EIO on write, durable", durability: .immediate, warmUp: true, faults: [.write: .fail(.ioError)],
            code: .io),
        CommitFault(
            name: "ENOSPC in the middle of the record, durable", durability: .immediate, warmUp: false,
            faults: [.write: .shortWrite(bytes: 10, then: .noSpace)], code: .noSpace),
        CommitFault(
            name: "part of the record written, then EIO, then the clean-up fails too", durability: .standard,
            warmUp: false, faults: [.write: .shortWrite(bytes: 9, then: .ioError), .truncate: .fail(.ioError)],
            code: .io),
        CommitFault(
            name: "no address space to map the file", durability: .standard, warmUp: false,
            faults: [.map: .fail(Errno(ENOMEM))], code: .io, usesFileLock: false),
    ]

    @Test(arguments: commitFaults)
    func aFailedCommitLeavesMemoryAndDiskAsTheyWere(fault: CommitFault) throws {
        try withTemporaryDirectory { directory throws in
            let options = Engine.Options(usesFileLock: fault.usesFileLock)
            try makeStore(in: directory, values: streakValues, options: options)
            let faults = FaultSwitch()
            let storage = openStore(directory, durability: fault.durability, io: faults.io, options: options)
            if fault.warmUp { try storage.storeOrThrow("warm", forKey: "warmUp") }
            let stored = try storage.rawJSON()
            let committedEnd = storage.engine.state.withLock { $0.log.end }
            let committedBytes = try Data(contentsOf: storage.fileURL).prefix(committedEnd)

            let rules = fault.faults
            faults.inject { call, _ in rules[call] }
            let failures: [(String, () throws -> Void)] = [
                ("storeOrThrow", { try storage.storeOrThrow(365, forKey: "streak") }),
                ("storeOrThrow, a new key", { try storage.storeOrThrow(1, forKey: "new") }),
                ("storeOrThrow(nil)", { try storage.storeOrThrow(nil, forKey: "streak") }),
                ("bulkStoreOrThrow", { try storage.bulkStoreOrThrow(items: ["streak": 365, "new": 1]) }),
                ("incrementIntegerOrThrow", { try storage.incrementIntegerOrThrow(forKey: "streak") }),
                ("update", { try storage.update("name", as: String.self) { $0 = "Grace" } }),
                ("resetOrThrow", { try storage.resetOrThrow() }),
            ]
            for (name, failure) in failures {
                do {
                    try failure()
                    Issue.record("\(name) did not throw")
                } catch let error as TinyStorageError {
                    #expect(error.code == fault.code, "\(name): \(error)")
                }
                // In memory: exactly as before.
                #expect(try storage.rawJSON() == stored, "\(name) changed the store in memory")
            }
            faults.clear()
            // On disk: the committed bytes are intact and nothing after them is a commit.
            let onDisk = try Data(contentsOf: storage.fileURL)
            #expect(onDisk.prefix(committedEnd) == committedBytes)
            #expect(try openStore(directory, options: options).rawJSON() == stored, "a failed commit reached the disk")

            // The store keeps working, and the log stays well-formed.
            try storage.storeOrThrow(366, forKey: "streak")
            let reopened = openStore(directory, options: options)
            var expected = stored
            expected["streak"] = Data("366".utf8)
            #expect(try reopened.rawJSON() == expected)
            #expect(try storage.rawJSON() == expected)
        }
    }

    /// The cross-process lock is never held across a flush (an iOS app suspended holding it is
    /// killed), so a durable commit is published before it is flushed. When the flush fails, the
    /// call throws `.io` — the commit is not acknowledged as durable — while the change, already
    /// visible to other processes, stays in memory and in the file alike: one truth. The durable
    /// mark does not pass it, and the next durable commit flushes it.
    @Test func aDurableCommitWhoseFlushFailsIsNotAcknowledgedAndStaysConsistent() throws {
        try withTemporaryDirectory { directory throws in
            try makeStore(in: directory, values: streakValues)
            let faults = FaultSwitch()
            let storage = openStore(directory, durability: .immediate, io: faults.io)
            try storage.storeOrThrow("warm", forKey: "warmUp")
            // NB: how far the file's own header says it is durable.
            func durableMark() throws -> Int {
                try Data(contentsOf: storage.fileURL).withUnsafeBytes { LogHeader.durableMark(in: $0) }
            }
            let durableBefore = try durableMark()

            faults.inject(.fail(.ioError), into: .sync)
            let error = expectError(.io) { try storage.storeOrThrow(365, forKey: "streak") }
            #expect(error?.message.contains("may not survive a power loss") == true, "\(String(describing: error))")
            faults.clear()

            #expect(storage.integer(forKey: "streak") == 365)
            #expect(openStore(directory).integer(forKey: "streak") == 365, "memory and file disagree")
            let end = storage.engine.state.withLock { $0.log.end }
            #expect(try durableMark() < end)
            #expect(durableBefore < end)

            try storage.storeOrThrow(366, forKey: "streak")
            let after = (storage.engine.state.withLock { $0.log.end }, try durableMark())
            #expect(after.1 == after.0, "the next durable commit flushes everything before it")
        }
    }

    /// Reads do not need the cross-process lock, so a lock that cannot be taken fails writes only:
    /// each is refused with the system's error, and nothing is written.
    @Test func aLockThatCannotBeTakenFailsWritesAndLeavesEverythingAsItWas() throws {
        try withTemporaryDirectory { directory throws in
            let fileURL = try makeStore(in: directory, values: streakValues)
            let stored = try openStore(directory).rawJSON()
            let bytes = try Data(contentsOf: fileURL)
            let faults = FaultSwitch()
            faults.inject(failing(.lock, Errno(ENOLCK)))

            let storage = openStore(directory, io: faults.io)
            #expect(try storage.rawJSON() == stored)
            expectError(.io) { try storage.storeOrThrow(1, forKey: "streak") }
            expectError(.io) { try storage.resetOrThrow() }
            #expect(try Data(contentsOf: fileURL) == bytes)
            #expect(try storage.rawJSON() == stored)

            faults.clear()
            try storage.storeOrThrow(365, forKey: "streak")
            #expect(openStore(directory).integer(forKey: "streak") == 365)
        }
    }

    @Test func aStoreWhoseFirstFileCannotBeWrittenIsUnavailableThenStartsEmpty() throws {
        try withTemporaryDirectory { directory throws in
            let faults = FaultSwitch()
            faults.inject(.shortWrite(bytes: 5, then: .noSpace), into: .write)
            let storage = openStore(directory, io: faults.io)
            #expect(unavailabilityError(storage)?.code == .noSpace)
            expectError(.unavailable) { try storage.storeOrThrow(1, forKey: "k") }
            #expect((try? fileSize(storage.fileURL)) ?? 0 == 0, "a partial header was left behind")

            faults.clear()
            #expect(try storage.rawJSON().isEmpty)
            try storage.storeOrThrow(1, forKey: "k")
            #expect(openStore(directory).integer(forKey: "k") == 1)
        }
    }

    // MARK: Compacting

    struct CompactionFault: Sendable, CustomTestStringConvertible {
        var call: FileIO.Call
        var fault: FileIO.Fault
        var pathSuffix: String?
        var code: TinyStorageError.Code

        var testDescription: String { "\(call): \(fault)" }
    }

    static let compactionFaults = [
        CompactionFault(call: .rename, fault: .fail(Errno(EXDEV)), code: .io),
        CompactionFault(call: .rename, fault: .fail(.accessDenied), code: .permissionDenied),
        CompactionFault(call: .rename, fault: .fail(.noSpace), code: .noSpace),
        CompactionFault(call: .open, fault: .fail(.accessDenied), pathSuffix: ".tmp", code: .permissionDenied),
        CompactionFault(call: .write, fault: .shortWrite(bytes: 40, then: .noSpace), code: .noSpace),
        CompactionFault(call: .sync, fault: .fail(.ioError), code: .io),
        CompactionFault(call: .read, fault: .fail(.ioError), code: .io),
    ]

    @Test(arguments: compactionFaults)
    func aFailedCompactionKeepsTheOldFileAndEveryValue(fault: CompactionFault) throws {
        try withTemporaryDirectory { directory throws in
            let faults = FaultSwitch()
            let storage = openStore(directory, io: faults.io)
            for round in 0..<20 { try storage.storeOrThrow("round \(round)", forKey: "often") }
            try storage.storeOrThrow(364, forKey: "streak")
            let stored = try storage.rawJSON()
            let bytes = try Data(contentsOf: storage.fileURL)
            let generation = try headerGeneration(storage.fileURL)

            let rule = fault
            faults.inject { call, path in
                guard call == rule.call else { return nil }
                if let suffix = rule.pathSuffix, path?.hasSuffix(suffix) != true { return nil }
                return rule.fault
            }
            let error = expectError(fault.code) { try storage.compactNow() }
            faults.clear()
            #expect(error != nil)

            #expect(try Data(contentsOf: storage.fileURL) == bytes)
            #expect(try headerGeneration(storage.fileURL) == generation)
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: storage.directoryURL.path)
            #expect(leftovers.filter { $0.hasSuffix(".tmp") }.isEmpty, "\(leftovers)")
            #expect(try storage.rawJSON() == stored)
            #expect(try openStore(directory).rawJSON() == stored)

            // The store keeps working, and compacts once the disk lets it.
            try storage.storeOrThrow(365, forKey: "streak")
            try storage.compactNow()
            #expect(try headerGeneration(storage.fileURL) > generation)
            #expect(try committedLength(storage.fileURL) < bytes.count)
            var expected = stored
            expected["streak"] = Data("365".utf8)
            #expect(try openStore(directory).rawJSON() == expected)
        }
    }

    // MARK: Recovering

    /// A store with one damaged record in the middle: opening it salvages.
    func makeDamagedStore(in directory: URL) throws -> (fileURL: URL, damaged: Data, expected: [String: Data]) {
        let storage = openStore(directory)
        var boundaries: [Int] = []
        for index in 0..<5 {
            boundaries.append(try committedLength(storage.fileURL))
            try storage.storeOrThrow("value \(index)", forKey: "k\(index)")
        }
        // Flushed, so that the damage lies below the durable mark: data loss, not a power loss.
        try storage.synchronize()
        var expected = try storage.rawJSON()
        expected["k2"] = nil
        var damaged = try Data(contentsOf: storage.fileURL)
        damaged[(boundaries[2] + boundaries[3]) / 2] ^= 0x08
        try damaged.write(to: storage.fileURL)
        return (storage.fileURL, damaged, expected)
    }

    @Test(arguments: [
        (FileIO.Call.makeDirectory, "/quarantine", TinyStorageError.Code.noSpace),
        (.open, ".tmp", .permissionDenied),
        (.rename, "/store.tinystorage", .io),
    ])
    func aSalvageThatCannotFinishChangesNothingAndIsRetried(
        call: FileIO.Call, pathSuffix: String, code: TinyStorageError.Code
    ) throws {
        try withTemporaryDirectory { directory throws in
            let (fileURL, damaged, expected) = try makeDamagedStore(in: directory)
            let faults = FaultSwitch()
            let errno: Errno = code == .noSpace ? .noSpace : code == .permissionDenied ? .accessDenied : .ioError
            faults.inject(failing(call, errno, pathEndingIn: pathSuffix))

            let storage = openStore(directory, io: faults.io)
            #expect(unavailabilityError(storage)?.code == code)
            expectError(.unavailable) { try storage.storeOrThrow(1, forKey: "k0") }
            #expect(try Data(contentsOf: fileURL) == damaged, "the damaged file was changed before it was set aside")

            faults.clear()
            expectDataLossReportedOnce(by: storage)
            #expect(try storage.rawJSON() == expected)
            #expect(storage.recoveryReports.count == 1)
            // NB: checked once repaired: a failed attempt may be under way on the file watch's thread.
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path + "/store")
            #expect(leftovers.filter { $0.hasSuffix(".tmp") }.isEmpty, "failed attempts left \(leftovers)")
            let quarantined = quarantineFiles(of: storage)
            #expect(!quarantined.isEmpty)
            for file in quarantined { #expect(try Data(contentsOf: file) == damaged) }
        }
    }

    /// The remains of an append whose process died lie past the committed length: reads ignore
    /// them, and the next commit cuts them off under the lock. When that cut fails, the commit
    /// fails and the file is left as it was; once the disk lets it, the commit cuts and goes on.
    /// With `flock` (Apple platforms), where nothing says a holder died, so any bytes past the
    /// committed length are taken for such remains; `CommitLockDeathTests` covers the mutex.
    @Test func anInterruptedWriteThatCannotBeCutBlocksWritesOnlyAndIsLeftAsItWas() throws {
        let options = Engine.Options(usesFileLock: true)
        func openStore(_ directory: URL, io: FileIO = .system) -> TinyStorage {
            TinyStorageTests.openStore(directory, io: io, options: options)
        }
        try withTemporaryDirectory { directory throws in
            let fileURL = try makeStore(in: directory, values: streakValues, options: options)
            let stored = try openStore(directory).rawJSON()
            let torn = try Data(contentsOf: fileURL) + Data([40, 0, 0, 0, 1, 2, 3])
            try torn.write(to: fileURL)
            let faults = FaultSwitch()
            faults.inject(.fail(.ioError), into: .truncate)

            let storage = openStore(directory, io: faults.io)
            #expect(try storage.rawJSON() == stored)
            expectError(.io) { try storage.storeOrThrow(365, forKey: "streak") }
            #expect(try Data(contentsOf: fileURL) == torn)

            faults.clear()
            try storage.storeOrThrow(365, forKey: "streak")
            #expect(storage.recoveryReports.map(\.isInterruptedWrite) == [true])
            #expect(openStore(directory).integer(forKey: "streak") == 365)
            #expect(quarantineFiles(of: storage).count == 1)
        }
    }

    // MARK: Interrupted system calls

    /// `EINTR` answered by the first attempt at every call a signal can interrupt (see
    /// ``InterruptingFileSystem``), on every path the engine has: opening, adopting, salvaging,
    /// cutting, committing durably, catching up, compacting. Each is made again and everything
    /// works; a shim that returned `EINTR` as a failure fails this test.
    @Test func interruptedCallsOnEveryPathAreRetried() throws {
        try withTemporaryDirectory { parent throws in
            let interrupting = InterruptingFileSystem()
            let io = FileIO(fileSystem: interrupting)

            // Adoption of the original library's file.
            let adopting = parent.appendingPathComponent("adopting", isDirectory: true)
            try FileManager.default.createDirectory(at: adopting, withIntermediateDirectories: false)
            let plist = try PropertyListSerialization.data(
                fromPropertyList: ["streak": Data("364".utf8)], format: .binary, options: 0)
            try plist.write(to: adopting.appendingPathComponent("tiny-storage.plist"))
            #expect(openStore(parent, name: "adopting", io: io).integer(forKey: "streak") == 364)

            // Salvage of a damaged file, and a cut of an interrupted write.
            let (_, _, expected) = try makeDamagedStore(in: parent.appendingPathComponent("damaged"))
            let salvaged = openStore(parent.appendingPathComponent("damaged"), io: io)
            expectDataLossReportedOnce(by: salvaged)
            #expect(try salvaged.rawJSON() == expected)
            #expect(salvaged.recoveryReports.count == 1)
            let tornURL = try makeStore(in: parent, name: "torn", values: streakValues)
            try (try Data(contentsOf: tornURL) + Data([30, 0, 0, 0, 9])).write(to: tornURL)
            let torn = openStore(parent, name: "torn", io: io)
            #expect(torn.integer(forKey: "streak") == 364)
            #expect(torn.recoveryReports.map(\.isInterruptedWrite) == [true])

            // Durable commits of every kind, under either commit lock, catching up, compacting.
            for options in [Engine.Options(), Engine.Options(usesFileLock: true)] {
                let folder = parent.appendingPathComponent("commits-\(options.usesFileLock)")
                let storage = openStore(folder, durability: .immediate, io: io, options: options)
                let other = openStore(folder, durability: .immediate, io: io, options: options)
                try storage.storeOrThrow(1, forKey: "a")
                try storage.bulkStoreOrThrow(items: ["b": 2, "c": 3])
                try storage.update("a", as: Int.self) { $0 = ($0 ?? 0) + 10 }
                #expect(try storage.incrementIntegerOrThrow(forKey: "a") == 12)
                storage.remove(key: "c")
                #expect(try other.rawJSON() == storage.rawJSON())
                try storage.compactNow()
                try other.storeOrThrow(4, forKey: "d")
                #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "d") == 4)
                try other.resetOrThrow()
                #expect(try storage.rawJSON().isEmpty)
                #expect(storage.recoveryReports.isEmpty && other.recoveryReports.isEmpty)
            }
            for call in [FileIO.Call.open, .makeDirectory, .read, .write, .sync, .lock, .stat, .rename, .truncate] {
                #expect(interrupting.interruptions(of: call) > 0, "no \(call) was interrupted")
            }
        }
    }

    // MARK: File systems that cannot flush a directory

    /// Some network and FUSE file systems answer a directory flush with `EINVAL`, `ENOTSUP` or
    /// `ENOTTY`: a store is still created and compacted there (its names are as durable as the
    /// file system makes them), while a data flush that fails still fails a durable commit.
    @Test(arguments: [EINVAL, ENOTSUP, ENOTTY])
    func aFileSystemThatCannotFlushDirectoriesStillHoldsAStore(code: Int32) throws {
        try withTemporaryDirectory { parent throws in
            let faults = FaultSwitch()
            // NB: directory flushes reach the seam with the directory's path, data flushes without.
            faults.inject { call, path in call == .sync && path != nil ? .fail(Errno(code)) : nil }
            let storage = openStore(parent, durability: .standard, io: faults.io)
            try storage.storeOrThrow(364, forKey: "streak")
            try storage.compactNow()
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
            #expect(faults.count(.sync) > 0, "directories were flushed")

            let durable = openStore(parent, name: "durable", durability: .immediate, io: faults.io)
            try durable.storeOrThrow(1, forKey: "a")
            faults.inject(.fail(Errno(code)), into: .sync)
            // A failed data flush still fails a durable commit.
            expectError(.io) { try durable.storeOrThrow(2, forKey: "a") }
            faults.clear()
            #expect(openStore(parent).integer(forKey: "streak") == 364)
        }
    }
}
