import Dispatch

extension Engine {
    /// Runs `body` with the engine's state under its in-process lock, then, with the lock
    /// released, logs what `body` noted and starts the file watch if the store just opened.
    ///
    /// NB: every entry point that can log, open or repair goes through here, which is how no
    /// logger is ever called under a lock (a logger that uses the store would deadlock).
    func withState<R, E: Error>(_ body: (inout EngineState) throws(E) -> R) throws(E) -> R {
        var logs: [DeferredLog] = []
        var opened = false
        defer {
            for entry in logs {
                logger.log(entry.level, entry.message, file: entry.file, function: entry.function, line: entry.line)
            }
            if opened { startWatching() }
        }
        return try state.withLock { (state) throws(E) -> R in
            LockWitness.enter(.engine)
            let wasOpen = state.isOpen
            defer {
                LockWitness.leave(.engine)
                if !state.deferredLogs.isEmpty {
                    logs = state.deferredLogs
                    state.deferredLogs.removeAll()
                }
                opened = !wasOpen && state.isOpen && !state.inMemory
            }
            return try body(&state)
        }
    }

    /// Runs `body` holding the cross-process lock. Call inside ``withState(_:)``.
    ///
    /// `body` must be short and the engine's own: no flush, no rewrite, no logging, no user code.
    func withFileLock<R>(
        _ state: inout EngineState, _ body: (inout EngineState) throws(TinyStorageError) -> R
    ) throws(TinyStorageError) -> R {
        if state.inMemory { return try body(&state) }
        guard let coordination = state.coordination else {
            throw TinyStorageError(.unavailable, "The store is not open.")
        }
        do throws(Errno) {
            try coordination.lock()
        } catch {
            throw .system(error, "take the lock on", path: coordination.path)
        }
        LockWitness.enter(.file)
        let start = LockHoldRecorder.isRecording ? DispatchTime.now().uptimeNanoseconds : 0
        defer {
            LockWitness.leave(.file)
            coordination.unlock()
            if start != 0 { LockHoldRecorder.record(DispatchTime.now().uptimeNanoseconds - start) }
        }
        return try body(&state)
    }
}
