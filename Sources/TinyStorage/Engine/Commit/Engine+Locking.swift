import Dispatch
import Foundation

// Where the locks are taken: the engine's in-process lock (`withState`) and, inside it, the
// cross-process commit lock (`withFileLock`: the lock page's robust mutex on Linux, `flock(2)`
// on Apple platforms, as ``Platform/commitLock`` decides, see ``CoordinationFile``). Lock order:
// the engine's lock, then the commit lock, never the other way round.
//
// The commit lock is held for a commit's append and publish only, and for the rename and publish
// of a compaction's or a repair's file. Under it, code never flushes (a cut's flush waits until
// it is released, see `takeFileLock`), rewrites a file, logs, or calls the user's code; every
// entry and exit is recorded by ``LockWitness`` so `LockContractTests` can see it from the seams.

extension Engine {
    /// Runs `body` with the engine's state under its in-process lock, then, with the lock
    /// released, logs what `body` noted and starts the file watch if the store just opened.
    ///
    /// NB: every entry point that can log, open or repair goes through here, which is how no
    /// logger is ever called under a lock (a logger that uses the store would deadlock).
    ///
    /// NB: inlined, as ``withFileLock(_:appending:_:)`` is, so the compiler sees a commit's whole
    /// path: the retains and releases it could then drop, and the calls, were a tenth of an overwrite.
    @inline(__always)
    func withState<R, E: Error>(_ body: (inout EngineState) throws(E) -> R) throws(E) -> R {
        var logs: [DeferredLog] = []
        var opened = false
        // NB: no `defer`, here or inside: each became a generic function of its own, called
        // unspecialized on every commit.
        let result = state.withLock { state -> Result<R, E> in
            LockWitness.enter(.engine)
            let wasOpen = state.isOpen
            let result: Result<R, E>
            do throws(E) {
                result = .success(try body(&state))
            } catch {
                result = .failure(error)
            }
            LockWitness.leave(.engine)
            if !state.deferredLogs.isEmpty {
                logs = state.deferredLogs
                state.deferredLogs.removeAll()
            }
            opened = !wasOpen && state.isOpen && !state.inMemory
            return result
        }
        for entry in logs {
            logger.log(entry.level, entry.message, file: entry.file, function: entry.function, line: entry.line)
        }
        if opened { startWatching() }
        return try result.get()
    }

    /// Runs `body` holding the cross-process lock. Call inside ``withState(_:)``.
    ///
    /// `body` must be short and the engine's own: no flush, no rewrite, no logging, no user code.
    ///
    /// - Parameter appending: Whether `body` only appends commits to a file of the current
    ///   format: then, on Linux, the lock is the shared mutex alone. Anything else (compactions,
    ///   repairs, format upgrades) also takes `flock`, which older versions of this library,
    ///   sharing a file of an older format, take instead (see `CoordinationFile.lock`).
    @inline(__always)
    func withFileLock<R>(
        _ state: inout EngineState, appending: Bool = false, _ body: (inout EngineState) throws(TinyStorageError) -> R
    ) throws(TinyStorageError) -> R {
        if state.inMemory { return try body(&state) }
        // NB: reached through `state` each time rather than bound, which retained and released
        // it around every commit. The lock file is opened once, with the store, and never
        // replaced (a reload keeps it), so the one unlocked is the one locked.
        guard state.coordination.file != nil else {
            throw TinyStorageError(.unavailable, "The store is not open.")
        }
        try takeFileLock(&state, appending: appending)
        LockWitness.enter(.file)
        let start = LockHoldRecorder.isRecording ? DispatchTime.now().uptimeNanoseconds : 0
        // NB: released on both paths by hand: a `defer` here became a generic function of its
        // own, called unspecialized, which retained the lock file to release it.
        let result: R
        do throws(TinyStorageError) {
            result = try body(&state)
        } catch {
            releaseFileLock(&state, appending: appending, heldSince: start)
            // NB: a failed append's remains were cut: flushed before the failure is reported.
            if let cuts = state.coordination.file?.cutAwaitingFlush { try? flushCuts(cuts, &state) }
            throw error
        }
        releaseFileLock(&state, appending: appending, heldSince: start)
        if let cuts = state.coordination.file?.cutAwaitingFlush {
            do throws(TinyStorageError) {
                try flushCuts(cuts, &state)
            } catch {
                state.note("\(error) The next commit flushes it before it appends.", level: .warning)
            }
        }
        return result
    }

    /// Takes the cross-process lock, and when a cut of the data file's end awaits a flush (see
    /// ``cutOff(from:in:holding:_:at:)``), lets go of it, flushes, and takes it again: nothing is
    /// appended after a cut until it is on stable storage, and no flush is made under the lock.
    @inline(__always)
    private func takeFileLock(_ state: inout EngineState, appending: Bool) throws(TinyStorageError) {
        while true {
            do throws(Errno) {
                // NB: its holder died holding it: the data file is checked from its start by the
                // next look, which the lock page now asks every process for; here, at least the
                // remains of an interrupted append are cut before anything is appended.
                if try state.coordination.file?.lock(excludingOlderVersions: !appending) == true {
                    state.log.mayHaveDeadTail = true
                }
            } catch {
                throw .system(error, "take the lock on", path: location.lockPath)
            }
            guard let cuts = state.coordination.file?.cutAwaitingFlush else { return }
            state.coordination.file?.unlock(excludingOlderVersions: !appending)
            try flushCuts(cuts, &state)
        }
    }

    /// ``flushCuts(_:in:_:)`` of this store's folder.
    private func flushCuts(_ cuts: UInt64, _ state: inout EngineState) throws(TinyStorageError) {
        guard let folder = state.log.folder, let coordination = state.coordination.file else { return }
        try flushCuts(cuts, in: folder, coordination)
    }

    /// The end of ``withFileLock(_:appending:_:)``.
    @inline(__always)
    private func releaseFileLock(_ state: inout EngineState, appending: Bool, heldSince start: UInt64) {
        LockWitness.leave(.file)
        state.coordination.file?.unlock(excludingOlderVersions: !appending)
        if start != 0 { LockHoldRecorder.record(DispatchTime.now().uptimeNanoseconds - start) }
    }
}

/// What a process killed while holding the commit lock may leave behind (see
/// ``Engine/holdCommitLock(leaving:_:)``).
package enum CommitLockRemains: String, Sendable, CaseIterable {
    /// Nothing: killed between two steps of a commit.
    case nothing
    /// The first half of a record past the published end: killed in the middle of an append.
    case tornRecord = "torn-record"
    /// A whole record, and the page in the middle of publishing it: killed inside `publish`.
    case halfPublished = "half-published"
    /// A compacted file renamed over the data file, its new generation not yet published:
    /// killed between a compaction's (or repair's) rename and its publish.
    case renamedUnpublished = "renamed-unpublished"
    /// A compaction's new file written, flushed and verified under its temporary name, not yet
    /// renamed: killed between writing its file and taking the lock to swap it in.
    case temporaryFile = "temporary-file"
}

extension Engine {
    /// Takes both locks, leaves what a committing process killed at that point would leave, and
    /// runs `body` still holding them: for the test helper, which is then killed with SIGKILL
    /// inside `body` to show that a dead holder blocks nobody and loses nothing acknowledged.
    ///
    /// The record left (half or whole) stores `remains.rawValue` under the key "unacknowledged";
    /// the file renamed into place holds the entries as they were.
    func holdCommitLock(leaving remains: CommitLockRemains, _ body: () -> Void) throws(TinyStorageError) {
        try withState { (state) throws(TinyStorageError) in
            try prepare(&state)
            // NB: written and flushed before the lock, as a compaction writes its file.
            let compacted =
                remains == .renamedUnpublished || remains == .temporaryFile
                ? try state.log.folder.map { (folder) throws(TinyStorageError) in
                    try writeVerifiedFile(
                        in: folder,
                        bytes: Self.compactedFile(
                            generation: state.log.generation + 1, baseSequence: state.log.sequence,
                            entries: state.index.entries, version: state.log.formatVersion, now: now
                        ).bytes,
                        noting: state.coordination.file
                    ).name
                } : nil
            try withFileLock(&state) { (state) throws(TinyStorageError) in
                guard let file = state.log.dataFile, let coordination = state.coordination.file else {
                    throw TinyStorageError(.unavailable, "The store is not open.")
                }
                let record = LogCommit(
                    sequence: state.log.sequence + 1,
                    operations: [.put(key: "unacknowledged", value: Data("\"\(remains.rawValue)\"".utf8))]
                ).encoded()
                switch remains {
                case .nothing, .temporaryFile:
                    break
                case .tornRecord:
                    let half = record.prefix(record.count / 2)
                    _ = half.withUnsafeBytes { io.write(file.fd, $0, at: state.log.end) }
                case .halfPublished:
                    _ = record.withUnsafeBytes { io.write(file.fd, $0, at: state.log.end) }
                    coordination.startPublishing(generation: state.log.generation, length: state.log.end + record.count)
                case .renamedUnpublished:
                    if let compacted, let folder = state.log.folder {
                        _ = folder.rename(compacted, to: StoreLocation.dataFileName)
                    }
                }
                body()
            }
        }
    }
}
