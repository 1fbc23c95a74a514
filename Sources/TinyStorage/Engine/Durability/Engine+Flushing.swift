import Foundation

// Durability: when what was appended reaches stable storage. It keeps no state under the engine's
// lock: a commit hands it what to flush (``AppendedCommit``), and the data file schedules and
// shares flushes (``DataFile``: one background flush per delay for `.standard` commits, one flush
// for every `.immediate` commit waiting, after the ``DurableCommitWindow`` gathered them).
//
// Rules: a commit's flush runs with no lock of the store held, and no flush ever runs under the
// commit lock (the flushes of a new file, a repair's file and a cut run under the engine's lock,
// so this process appends nothing before they finish). A flush reaches only as far as this
// process verified the log (``Engine/verifiedEnd(of:)``), never as far as the lock page claims,
// and the durable mark in the file's header is written only after the flush it records succeeded.

extension Engine {
    /// What is left of a commit once both locks are released.
    struct CommittedAppend {
        /// An `.immediate` commit's flush.
        var flush: AppendedCommit?
        /// The log's length, when it has grown worth compacting.
        var compactionEnd: Int?
    }

    /// After a commit appended to `state`'s file: wakes the other processes' watches, and
    /// schedules a `.standard` commit's flush (within ``DataFile/backgroundFlushDelay``); both
    /// cheap, so done here, under the engine's lock with the file lock released.
    ///
    /// NB: what must wait until no lock is held (an `.immediate` commit's flush, a compaction) is
    /// returned; most commits have neither, and then no reference to the files leaves the lock:
    /// carrying three out, to release them after, was a tenth of an overwrite.
    ///
    /// - Returns: `nil` when nothing is left (always in memory).
    func afterAppend(_ state: inout EngineState) -> CommittedAppend? {
        // NB: each path takes only the references it uses (each taken is retained and released).
        guard state.log.dataFile != nil, state.coordination.file != nil, state.log.folder != nil else { return nil }
        state.coordination.file?.signalChange()
        var compactionEnd: Int?
        if state.log.end >= state.log.nextCompactionRequest,
            Self.shouldCompact(end: state.log.end, liveBytes: state.index.builtLiveBytes)
        {
            state.log.nextCompactionRequest = state.log.end + Self.compactionRequestInterval
            compactionEnd = state.log.end
        }
        guard durability == .standard else {
            guard let file = state.log.dataFile, let coordination = state.coordination.file,
                let folder = state.log.folder
            else {
                return nil
            }
            let appended = AppendedCommit(
                file: file, end: state.log.end, generation: state.log.generation, coordination: coordination,
                folder: folder,
                marksDurability: state.log.formatVersion >= 2)
            return CommittedAppend(flush: appended, compactionEnd: compactionEnd)
        }
        if options.backgroundFlushes, state.log.dataFile?.requestBackgroundSync(through: state.log.end) == true,
            let file = state.log.dataFile
        {
            let generation = state.log.generation
            let marksDurability = state.log.formatVersion >= 2
            let verifiedEnd = verifiedEnd(of: generation)
            file.startBackgroundSync(logger: logger, appendedThrough: verifiedEnd) { end in
                if marksDurability { file.recordDurableMark(through: end, flushesLater: true) }
            }
        }
        return compactionEnd.map { CommittedAppend(flush: nil, compactionEnd: $0) }
    }

    /// How far this process has verified the log of the file of `generation`, asked when called
    /// (under the engine's lock); 0 once the file was replaced. What a flush reaches for and
    /// records as durable: never the lock page's length, which may claim more than the file holds.
    ///
    /// NB: asked as a flush begins, so it covers every commit of this process made by then (see
    /// `DataFile.requestBackgroundSync`): a commit sets the end, then looks whether a flush is
    /// scheduled, both under the engine's lock.
    func verifiedEnd(of generation: UInt64) -> @Sendable () -> Int {
        { [state] in state.withLock { $0.log.generation == generation && $0.log.dataFile != nil ? $0.log.end : 0 } }
    }

    /// With no lock held: what ``afterAppend(_:)`` left. An `.immediate` commit is flushed,
    /// sharing one flush with concurrent commits; a log grown worth compacting is compacted.
    func finishCommit(_ committed: CommittedAppend) throws(TinyStorageError) {
        if let appended = committed.flush { try flush(appended) }
        if let end = committed.compactionEnd { scheduleCompaction(end: end) }
    }

    /// Where a commit was appended, for its flush.
    ///
    /// NB: a class, so a ``CommittedAppend`` is two words that every commit copies cheaply; a
    /// struct of four references made each copy and destruction an out-of-line call, on every
    /// commit, for the `.immediate` ones that need it.
    final class AppendedCommit {
        let file: DataFile
        let end: Int
        let generation: UInt64
        let coordination: CoordinationFile
        let folder: StoreFolder
        /// Whether the file records how far it is durable (format version 2).
        let marksDurability: Bool

        init(
            file: DataFile, end: Int, generation: UInt64, coordination: CoordinationFile, folder: StoreFolder,
            marksDurability: Bool
        ) {
            self.file = file
            self.end = end
            self.generation = generation
            self.coordination = coordination
            self.folder = folder
            self.marksDurability = marksDurability
        }
    }

    /// Flushes `appended.file` through `appended.end`, then records how far it is durable. No
    /// lock is held. A file that a compaction or repair just renamed into place has its name
    /// flushed too (the directory synced), or a power loss could bring the old file back.
    private func flush(_ appended: AppendedCommit) throws(TinyStorageError) {
        let coordination = appended.coordination
        do throws(Errno) {
            try appended.file.sync(through: appended.end, appendedThrough: verifiedEnd(of: appended.generation)) {
                durableWindow.gather()
            }
            let inode = appended.file.inode
            if inode.map({ !coordination.isNameDurable(ofFileWithInode: $0) }) ?? true {
                try appended.folder.sync().get()
                if let inode { coordination.recordNameDurable(ofFileWithInode: inode) }
            }
        } catch {
            let failure =
                FileIO.flushUnsupported.contains(error)
                ? TinyStorageError(
                    .io,
                    "The change was written, but the file system of '\(location.directoryPath)' cannot flush to "
                        + "stable storage (\(error)), so nothing there can be made durable: .immediate commits and "
                        + "synchronize() fail. Use .standard durability, or keep the store on the device's own disk.",
                    underlying: error)
                : TinyStorageError(
                    .io,
                    "The change was written, but flushing it to stable storage failed, so it may not survive a "
                        + "power loss. Check the disk; the next durable commit flushes again.",
                    underlying: error)
            log(failure)
            throw failure
        }
        if appended.marksDurability {
            appended.file.recordDurableMark(through: appended.end, flushesLater: options.backgroundFlushes)
        }
    }

    /// Flushes everything committed so far (see `TinyStorage.synchronize()`).
    func synchronize() throws(TinyStorageError) {
        let target = try withState { (state) throws(TinyStorageError) -> AppendedCommit? in
            if state.inMemory { return nil }
            try prepare(&state)
            guard let file = state.log.dataFile, let coordination = state.coordination.file,
                let folder = state.log.folder
            else {
                return nil
            }
            return AppendedCommit(
                file: file, end: state.log.end, generation: state.log.generation, coordination: coordination,
                folder: folder,
                marksDurability: state.log.formatVersion >= 2)
        }
        guard let target else { return }
        try flush(target)
        // NB: and the durable mark the flush wrote: from here on, losing anything committed so
        // far is reported as data loss, not taken for a power loss.
        do throws(Errno) {
            if target.marksDurability {
                try target.file.recordDurableMark(through: target.end, flushesLater: false).get()
                try target.file.syncDurableMark()
            }
        } catch {
            let failure = TinyStorageError(
                .io, "Everything committed is on stable storage, but recording so in the file failed. Check the disk.",
                underlying: error)
            log(failure)
            throw failure
        }
    }
}
