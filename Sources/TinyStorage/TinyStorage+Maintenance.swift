package import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// Tools for the `tinystorage` command and tests: look at a store without changing it, compact it,
// follow its changes. Not public API.

/// What a read-only look at a store's data file found.
package struct StoreInspection: Sendable {
    /// The data file's path and size in bytes.
    package var path: String
    package var fileSize: Int
    /// The format version and generation from the header, when it verified.
    package var formatVersion: UInt32?
    package var generation: UInt64?
    /// Why the header did not verify, when it did not.
    package var headerProblem: String?
    /// Records that verified, and the offset just past the last of them.
    package var recordCount: Int
    package var logicalEnd: Int
    /// Byte ranges that failed verification (an incomplete last record included).
    package var damagedRanges: [Range<Int>]
    /// Whether the only damage is an incomplete last record (an interrupted write).
    package var isOnlyInterruptedWrite: Bool
    /// Keys the damaged bytes seem to hold, read without trusting them, as a recovery report
    /// names them (``TinyStorage/RecoveryReport/possiblyAffectedKeys``): their values may be older
    /// than they should be, or missing. Empty when there is no damage or it names no key.
    package var possiblyAffectedKeys: [String] = []
    /// Every key and its stored value, from the records that verified; values that had expired
    /// when the file was read are left out (see ``expiredKeys``), as a store leaves them out.
    package var entries: [String: StoredValue]
    /// The keys whose values had expired when the file was read: still in the file until a
    /// compaction removes them, read as absent.
    package var expiredKeys: [String] = []
    /// The wall clock when the file was read (milliseconds since 1970), which decided what had
    /// expired.
    package var readAt: UInt64 = 0
    /// Files in the store's `quarantine/` folder.
    package var quarantineFiles: [String]

    /// No damage anywhere and a valid header.
    package var isHealthy: Bool { headerProblem == nil && damagedRanges.isEmpty }
}

extension TinyStorage {
    /// Reads the data file of the store in `directory` without creating, locking or changing
    /// anything, and reports what verifies.
    ///
    /// - Throws: `.unavailable` when the file is missing or cannot be read (`permissionDenied`,
    ///   `io` as the underlying error).
    package static func inspect(storeDirectory directory: URL) throws(TinyStorageError) -> StoreInspection {
        try inspect(storeDirectory: directory, clock: .system)
    }

    /// ``inspect(storeDirectory:)``, values expiring by `clock`.
    static func inspect(storeDirectory directory: URL, clock: ExpiryClock) throws(TinyStorageError) -> StoreInspection {
        let io = FileIO.system
        let path = directory.appendingPathComponent(StoreLocation.dataFileName).path
        // NB: the rules of a read-only open: no link is followed, a folder others may write to is
        // refused, and the files may belong to another user (this only reads them).
        let folder = try StoreFolder.open(
            parentPath: directory.deletingLastPathComponent().path, name: directory.lastPathComponent, io: io,
            create: false, readOnly: true)
        guard let folder, let fd = try folder.openFile(StoreLocation.dataFileName, writable: false, creation: .never)
        else {
            throw .system(.notFound, "open", path: path)
        }
        defer { io.close(fd) }
        let bytes: [UInt8]
        switch io.status(fd).flatMap({ io.read(fd, count: $0.size, at: 0) }) {
        case .success(let value): bytes = value
        case .failure(let error): throw .system(error, "read", path: path)
        }
        var inspection = StoreInspection(
            path: path, fileSize: bytes.count, recordCount: 0, logicalEnd: 0, damagedRanges: [],
            isOnlyInterruptedWrite: false, entries: [:], quarantineFiles: [])
        if let quarantine = try? folder.subfolder(StoreLocation.quarantineDirectoryName, create: false),
            case .success(let names) = io.entries(of: quarantine.directory)
        {
            inspection.quarantineFiles = names.sorted()
        }
        var entries: [String: StoredValue] = [:]
        var recordCount = 0
        bytes.withUnsafeBytes { raw in
            var version: UInt32?
            switch LogHeader.decode(raw) {
            case .success(let header):
                inspection.formatVersion = header.version
                inspection.generation = header.generation
                version = header.version
            case .failure(let problem):
                inspection.headerProblem = "\(problem)"
            }
            let start = min(version.map(LogFormat.headerSize(version:)) ?? LogFormat.minimumHeaderSize, raw.count)
            let firstPass = LogScanner.scan(raw, from: start, version: version) { _ in }
            inspection.logicalEnd = firstPass.end
            // The same rule as opening: damage with no verifiable record after it is an
            // interrupted last write, whether its length or its checksum gave it away.
            if let offset = firstPass.stop.offset,
                LogScanner.nextVerifiableRecord(in: raw, after: offset, version: version) == nil
            {
                inspection.isOnlyInterruptedWrite = true
            }
            inspection.damagedRanges = LogScanner.salvage(raw, from: start, version: version) { commit in
                recordCount += 1
                if commit.clearsFirst { entries.removeAll() }
                for operation in commit.operations {
                    switch operation {
                    case .put(let key, let value, let kind, let deadline):
                        entries[key] = StoredValue(value, kind: kind, deadline: deadline)
                    case .remove(let key): entries[key] = nil
                    }
                }
            }
            // NB: read as a repair reads them (`Recovery.swift`), so the tool names what the
            // library will report.
            let keys = inspection.damagedRanges.flatMap { LogScanner.probableKeys(in: raw, range: $0) }
            inspection.possiblyAffectedKeys = Array(Set(keys)).sorted()
        }
        inspection.recordCount = recordCount
        // NB: the clock is read after the file: a value that expired while it was read is gone.
        inspection.readAt = clock.now()
        inspection.expiredKeys = entries.filter { $0.value.hasExpired(at: inspection.readAt) }.map(\.key).sorted()
        for key in inspection.expiredKeys { entries[key] = nil }
        inspection.entries = entries
        if inspection.headerProblem != nil { inspection.isOnlyInterruptedWrite = false }
        return inspection
    }

    /// Rewrites the data file with only the live entries now, whatever its size.
    /// - Throws: `.unavailable`, file-system errors. The old file stays in place on failure.
    package func compactNow() throws(TinyStorageError) {
        try engine.compactNow()
    }

    /// One commit as seen by ``rawChanges()``.
    package struct RawChange: Sendable {
        /// The changed keys and the value each holds now (`nil`: removed).
        package var keys: [String]
        package var values: [StoredValue?]
        /// The writer's `writeID`, when it passed one.
        package var writeID: String?
        /// Whether another process (or another instance) made the change.
        package var isExternal: Bool
    }

    /// Every change from now on, local or external, one element per commit, in commit order.
    package func rawChanges() -> AsyncStream<RawChange> {
        let (stream, continuation) = AsyncStream<RawChange>.makeStream(bufferingPolicy: .unbounded)
        let id = UUID()
        engine.carryValuesInChanges()  // NB: before reading the sequence the stream starts after
        let subscriber = ValueSubscriber(
            key: "", startAfter: engine.delivery.lastSequence, receive: { _ in }, finish: { continuation.finish() },
            receiveChange: { change in
                continuation.yield(
                    RawChange(
                        keys: Array(change.keys), values: change.values, writeID: change.writeID,
                        isExternal: change.isExternal
                    ))
            })
        subscribers.withLock { $0[id] = subscriber }
        continuation.onTermination = { [weak self] _ in self?.subscribers.withLock { $0[id] = nil } }
        return stream
    }
}

extension TinyStorage {
    /// For TinyStorageTesting: returns once every change committed so far has been delivered
    /// (streams fed, notifications posted, Observation signalled), so a test that starts
    /// listening afterwards hears nothing of them. Waits on a thread of its own, never on the
    /// caller's: the announcing queue (the main queue by default) must be running.
    package func waitUntilAnnounced() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                self.engine.delivery.waitUntilDelivered()
                continuation.resume()
            }
        }
    }

    /// For TinyStorageTesting, before it removes a test's store folder: flushes what is
    /// committed (so no background flush writes afterwards) and waits for background
    /// compactions, so nothing of this store touches the folder once it returns, as long as no
    /// one commits again. Failures are ignored: the folder is about to go.
    package func finishBackgroundWork() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                try? self.engine.synchronize()
                Engine.waitForBackgroundCompactions()
                continuation.resume()
            }
        }
    }
}

extension TinyStorage {
    /// Whether the calling thread holds a lock of any store (see `LockWitness`): for the test
    /// helper, which checks from another process's point of view that loggers and `update`
    /// closures never run under one.
    package static var isHoldingStoreLock: Bool { LockWitness.isHoldingAnyLock }

    /// For the test helper: takes the store's cross-process commit lock, leaves `remains` as a
    /// process killed at that point of a commit would, and runs `body` holding the lock (the
    /// helper is killed with SIGKILL there).
    package func holdCommitLock(leaving remains: CommitLockRemains, _ body: () -> Void) throws(TinyStorageError) {
        try engine.holdCommitLock(leaving: remains, body)
    }
}
