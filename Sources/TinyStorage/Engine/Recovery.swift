import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension Engine {
    /// Rebuilds a store from a damaged file. Call under the file lock.
    ///
    /// Copies the whole file to `quarantine/`, recovers every record that verifies (skipping over
    /// damage), writes them to a new file that replaces the damaged one, and reports. When `header`
    /// is `nil` the header itself was unreadable, and records are searched for after it anyway.
    func salvage(_ bytes: [UInt8], header: LogHeader?, into fresh: inout EngineState) throws(TinyStorageError) {
        guard let coordination = fresh.coordination else {
            throw TinyStorageError(.unavailable, "The store is not open.")
        }
        var recovered = 0
        var damaged: [Range<Int>] = []
        var keys: [String] = []
        bytes.withUnsafeBytes { raw in
            let start = min(LogFormat.headerSize, raw.count)
            damaged = LogScanner.salvage(raw, from: start) { commit in
                recovered += 1
                apply(commit, to: &fresh, isExternal: true, collectChanges: false)
            }
            if header == nil { damaged.insert(0..<start, at: 0) }
            for range in damaged { keys += LogScanner.probableKeys(in: raw, range: range) }
        }
        let quarantineURL = try quarantine(bytes[...], label: "damaged-file", in: fresh)
        let generation = max(header?.generation ?? 0, coordination.published.generation) + 1
        let replacement = try writeReplacement(entries: fresh.entries, generation: generation, in: fresh)
        fresh.dataFile = replacement.file
        fresh.generation = generation
        fresh.end = replacement.size
        fresh.physicalSize = replacement.size
        let report = TinyStorage.RecoveryReport(
            date: Date(),
            error: TinyStorageError(
                .corrupted,
                "Part of '\(location.dataPath)' failed verification. Every verified record was kept and "
                    + "the file was rebuilt; a copy of the damaged file is in the quarantine folder."),
            damagedRanges: damaged, recoveredRecordCount: recovered,
            possiblyAffectedKeys: Array(Set(keys)).sorted(), quarantineURL: quarantineURL,
            isInterruptedWrite: false)
        fresh.recoveries.append(report)
        logger.log("\(report.error.description) \(report)", level: .error)
    }

    /// Copies `bytes` to a new file in `quarantine/`, synced, and returns its URL.
    func quarantine(_ bytes: ArraySlice<UInt8>, label: String, in state: EngineState) throws(TinyStorageError) -> URL {
        guard let folder = state.folder else { throw TinyStorageError(.unavailable, "The store is not open.") }
        guard let quarantine = try folder.subfolder(StoreLocation.quarantineDirectoryName, create: true) else {
            throw TinyStorageError(.io, "The quarantine directory in '\(folder.path)' could not be created.")
        }
        let stamp = UInt64(Date().timeIntervalSince1970 * 1000)
        var name = "\(label)-\(stamp).bin"
        var attempt = 1
        var created = try quarantine.createNewFile(name)
        while created == nil {
            attempt += 1
            name = "\(label)-\(stamp)-\(attempt).bin"
            created = try quarantine.createNewFile(name)
        }
        let path = quarantine.path(of: name)
        guard let fd = created else { throw TinyStorageError(.io, "Could not create '\(path)'.") }
        let result = bytes.withUnsafeBytes { io.write(fd, $0, at: 0) }.flatMap { io.sync(fd) }
            .flatMap { _ in io.close(fd) }
            .flatMap { quarantine.sync() }
            .flatMap { folder.sync() }
        if case .failure(let error) = result {
            io.close(fd)
            throw .system(error, "save damaged bytes to", path: path)
        }
        return URL(fileURLWithPath: path)
    }

    /// Writes `entries` to a new data file, reads it back to verify it, and renames it over the
    /// current one: the previous file stays in place until the new one is verified.
    ///
    /// `write(2)`, `fsync(2)`, `pread(2)` + verify, `rename(2)`, `fsync(2)` of the directory. The
    /// new file is created under a name no one can predict, with `O_EXCL`.
    func writeReplacement(
        entries: [String: CachedEntry], generation: UInt64, in state: EngineState
    ) throws(TinyStorageError) -> (file: DataFile, size: Int) {
        guard let folder = state.folder else { throw TinyStorageError(.unavailable, "The store is not open.") }
        var bytes = LogHeader(generation: generation).encoded()
        var commit = LogCommit(operations: [])
        commit.operations.reserveCapacity(1)
        for (key, entry) in entries {
            commit.operations.removeAll(keepingCapacity: true)
            commit.operations.append(.put(key: key, value: entry.bytes))
            commit.encode(into: &bytes)
        }
        folder.removeAbandonedTemporaryFiles()
        let (temporary, fd) = try folder.createTemporaryFile(for: StoreLocation.dataFileName)
        let temporaryPath = folder.path(of: temporary)
        let file = DataFile(fd: fd, io: io, syncedThrough: bytes.count)
        let written = bytes.withUnsafeBytes { io.write(fd, $0, at: 0) }
            .flatMap { io.sync(fd) }
            .flatMap { io.read(fd, count: bytes.count + 1, at: 0) }
        guard case .success(let readBack) = written, readBack == bytes else {
            _ = folder.remove(temporary)
            if case .failure(let error) = written {
                throw .system(error, "write the new file", path: temporaryPath)
            }
            throw TinyStorageError(
                .io, "The new file '\(temporaryPath)' did not read back as written; the old file was kept.")
        }
        if case .failure(let error) = folder.rename(temporary, to: StoreLocation.dataFileName) {
            _ = folder.remove(temporary)
            throw .system(error, "replace the data file with", path: temporaryPath)
        }
        if case .failure(let error) = folder.sync() {
            // The new file is in place and complete; only the rename's durability is in doubt.
            logger.log("Could not sync the store directory after replacing its file: \(error).", level: .warning)
        }
        return (file, bytes.count)
    }
}
