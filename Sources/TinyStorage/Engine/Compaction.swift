import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

extension Engine {
    /// Whether the log has grown enough past its live data to be worth rewriting.
    static func shouldCompact(end: Int, liveBytes: Int) -> Bool {
        end >= minimumCompactionSize && end >= compactionRatio * liveBytes
    }

    /// Compacts when ``shouldCompact(end:liveBytes:)`` says so. Failures are logged, never thrown:
    /// the commit that triggered compaction has already succeeded.
    func compactIfNeeded(_ state: inout EngineState) {
        guard Self.shouldCompact(end: state.end, liveBytes: state.liveBytes) else { return }
        do throws(TinyStorageError) {
            try compact(&state)
        } catch {
            logger.log("Compaction failed; the store keeps working on its current file. \(error)", level: .warning)
        }
    }

    /// Rewrites the live entries into a new file and puts it in place of the old one.
    ///
    /// Write the new file, `fsync(2)` it, `rename(2)` it over the old one, `fsync(2)` the
    /// directory, then bump the generation so other processes reload. A crash at any step leaves
    /// either the old file or the complete new one in place. Call under the file lock.
    func compact(_ state: inout EngineState) throws(TinyStorageError) {
        guard let coordination = state.coordination, state.isOpen else {
            throw TinyStorageError(.unavailable, "The store is not open.")
        }
        let generation = state.generation + 1
        var bytes = LogHeader(generation: generation).encoded()
        bytes.reserveCapacity(state.liveBytes)
        var commit = LogCommit(operations: [])
        commit.operations.reserveCapacity(1)
        for (key, entry) in state.entries {
            commit.operations.removeAll(keepingCapacity: true)
            commit.operations.append(.put(key: key, value: entry.bytes))
            commit.encode(into: &bytes)
        }

        let temporary = location.compactionPath
        let fd: Int32
        switch io.open(temporary, flags: O_RDWR | O_CREAT | O_TRUNC, mode: 0o600) {
        case .success(let value): fd = value
        case .failure(let error): throw .system(error, "create", path: temporary)
        }
        let file = DataFile(fd: fd, io: io, syncedThrough: bytes.count)
        let written = bytes.withUnsafeBytes { io.write(fd, $0, at: 0) }
            .flatMap { io.sync(fd) }
            .flatMap { io.rename(temporary, to: location.dataPath) }
        if case .failure(let error) = written {
            _ = io.unlink(temporary)
            throw .system(error, "write the compacted file", path: temporary)
        }
        DataProtection.removeProtection(atPath: location.dataPath)
        if case .failure(let error) = io.syncDirectory(location.directoryPath) {
            // The new file is in place and complete; only the rename's durability is in doubt.
            logger.log("Could not sync the store directory after compaction: \(error).", level: .warning)
        }
        let before = state.end
        state.dataFile = file
        state.generation = generation
        state.end = bytes.count
        state.physicalSize = bytes.count
        state.seenSequence = coordination.publish(generation: generation, length: bytes.count)
        logger.log("Compacted \(location.dataPath) from \(before) to \(bytes.count) bytes.", level: .debug)
    }
}
