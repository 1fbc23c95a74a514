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
        fresh.logSequence = header?.baseSequence ?? 0
        bytes.withUnsafeBytes { raw in
            let start = header?.size ?? min(LogFormat.minimumHeaderSize, raw.count)
            damaged = LogScanner.salvage(raw, from: start, version: header?.version) { commit in
                recovered += 1
                apply(commit, to: &fresh, isExternal: true, collectChanges: false)
            }
            // NB: without a header, records are searched for from the smallest header size on; the
            // unreadable header and any damage right after it are one range.
            if header == nil {
                if let first = damaged.first, first.lowerBound == start {
                    damaged[0] = 0..<first.upperBound
                } else {
                    damaged.insert(0..<start, at: 0)
                }
            }
            for range in damaged { keys += LogScanner.probableKeys(in: raw, range: range) }
        }
        let quarantineURL = try quarantine(bytes[...], label: "damaged-file")
        let generation = max(header?.generation ?? 0, coordination.published.generation) + 1
        let replacement = try writeReplacement(
            entries: fresh.entries, generation: generation, baseSequence: fresh.logSequence)
        fresh.logSequence += UInt64(fresh.entries.count)
        fresh.formatVersion = LogFormat.version
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
        logger.log(.error, "\(report.error.description) \(report)")
    }

    /// Copies `bytes` to a new file in `quarantine/`, synced, and returns its URL.
    func quarantine(_ bytes: ArraySlice<UInt8>, label: String) throws(TinyStorageError) -> URL {
        let directory = location.quarantineDirectoryPath
        let stamp = UInt64(Date().timeIntervalSince1970 * 1000)
        var path = "\(directory)/\(label)-\(stamp).bin"
        var attempt = 1
        while case .success = io.status(atPath: path) {
            attempt += 1
            path = "\(directory)/\(label)-\(stamp)-\(attempt).bin"
        }
        let result = io.makeDirectory(directory, mode: 0o700)
            .flatMap { io.open(path, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o600) }
            .flatMap { fd -> Result<Void, Errno> in
                defer { io.close(fd) }
                return bytes.withUnsafeBytes { io.write(fd, $0, at: 0) }.flatMap { io.sync(fd) }
            }
            .flatMap { io.syncDirectory(directory) }
        if case .failure(let error) = result {
            throw .system(error, "save damaged bytes to", path: path)
        }
        return URL(fileURLWithPath: path)
    }

    /// Writes `entries` to a new data file, reads it back to verify it, and renames it over the
    /// current one: the previous file stays in place until the new one is verified.
    ///
    /// `write(2)`, `fsync(2)`, `pread(2)` + verify, `rename(2)`, `fsync(2)` of the directory.
    ///
    /// The new file is in the current format; its records continue the commit order after
    /// `baseSequence`, which its header records.
    func writeReplacement(
        entries: [String: CachedEntry], generation: UInt64, baseSequence: UInt64
    ) throws(TinyStorageError) -> (file: DataFile, size: Int) {
        var bytes = LogHeader(generation: generation, baseSequence: baseSequence).encoded()
        var commit = LogCommit(sequence: baseSequence, operations: [])
        commit.operations.reserveCapacity(1)
        for (key, entry) in entries {
            commit.sequence += 1
            commit.operations.removeAll(keepingCapacity: true)
            commit.operations.append(.put(key: key, value: entry.bytes, kind: entry.kind))
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
            .flatMap { io.read(fd, count: bytes.count + 1, at: 0) }
        guard case .success(let readBack) = written, readBack == bytes else {
            _ = io.unlink(temporary)
            if case .failure(let error) = written { throw .system(error, "write the new file", path: temporary) }
            throw TinyStorageError(
                .io, "The new file '\(temporary)' did not read back as written; the old file was kept.")
        }
        if case .failure(let error) = io.rename(temporary, to: location.dataPath) {
            _ = io.unlink(temporary)
            throw .system(error, "replace the data file with", path: temporary)
        }
        DataProtection.removeProtection(atPath: location.dataPath)
        if case .failure(let error) = io.syncDirectory(location.directoryPath) {
            // The new file is in place and complete; only the rename's durability is in doubt.
            logger.log(.warning, "Could not sync the store directory after replacing its file: \(error).")
        }
        return (file, bytes.count)
    }
}
