import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension Engine {
    /// Creates the directory if needed, maps the lock file and reads the data file.
    ///
    /// A missing directory or data file is a new, empty store. Anything that exists but cannot be
    /// read makes the store unavailable: it is never treated as empty.
    func open(_ state: inout EngineState) throws(TinyStorageError) {
        if let nameError {
            state.failure = nameError
            throw nameError
        }
        do throws(TinyStorageError) {
            try createDirectories()
            if state.coordination == nil {
                do throws(Errno) {
                    let coordination = try CoordinationFile(path: location.lockPath, io: io)
                    state.coordination = coordination
                    mirror.attach(coordination)
                } catch {
                    throw TinyStorageError.system(error, "open the lock file", path: location.lockPath)
                }
                DataProtection.removeProtection(atPath: location.lockPath)
            }
            try withFileLock(&state) { (state) throws(TinyStorageError) in try reloadFully(&state) }
            state.failure = nil
        } catch {
            let failure = error.code == .unavailable ? error : unavailable(error)
            state.failure = failure
            throw failure
        }
    }

    private func createDirectories() throws(TinyStorageError) {
        let parent = location.directory.deletingLastPathComponent()
        var isDirectory: ObjCBool = false
        if !FileManager.default.fileExists(atPath: parent.path, isDirectory: &isDirectory) {
            do {
                try FileManager.default.createDirectory(
                    at: parent, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw TinyStorageError(
                    .permissionDenied,
                    "Could not create the directory '\(parent.path)' that should hold the store.",
                    underlying: error)
            }
        }
        let created = !FileManager.default.fileExists(atPath: location.directoryPath)
        if case .failure(let error) = io.makeDirectory(location.directoryPath, mode: 0o700) {
            throw .system(error, "create the store directory", path: location.directoryPath)
        }
        if created { DataProtection.removeProtection(atPath: location.directoryPath) }
    }

    /// Brings the state up to date with what other processes committed. Call under the file lock.
    func catchUp(_ state: inout EngineState) throws(TinyStorageError) {
        guard let coordination = state.coordination, let file = state.dataFile else {
            return try reloadFully(&state)
        }
        let published = coordination.published
        guard published.generation == state.generation, published.length >= state.end,
            try applyTail(of: file, upTo: published.length, to: &state)
        else {
            return try reloadFully(&state)
        }
        state.seenSequence = coordination.sequence
    }

    /// Catches up without the file lock when that is safe: the data file was not replaced and only
    /// grew. Published bytes are never changed in place, so they can be read while another process
    /// appends after them. Returns `false` when the caller must take the lock and use ``catchUp``.
    func catchUpWithoutFileLock(_ state: inout EngineState) -> Bool {
        guard let coordination = state.coordination, let file = state.dataFile else { return false }
        let sequence = coordination.sequence  // NB: read first, so later commits are not marked seen
        guard let published = coordination.consistentPublished, published.generation == state.generation,
            published.length >= state.end,
            (try? applyTail(of: file, upTo: published.length, to: &state)) == true
        else { return false }
        state.seenSequence = sequence
        return true
    }

    /// Reads and applies the records between `state.end` and `length`.
    /// - Returns: `false` when those bytes do not verify as whole records (the caller reloads).
    private func applyTail(
        of file: DataFile, upTo length: Int, to state: inout EngineState
    ) throws(TinyStorageError)
        -> Bool
    {
        guard length > state.end else { return true }
        let tail: [UInt8]
        switch io.read(file.fd, count: length - state.end, at: state.end) {
        case .success(let bytes): tail = bytes
        case .failure(let error): throw unavailable(.system(error, "read", path: location.dataPath))
        }
        var commits: [LogCommit] = []
        let scanned = tail.withUnsafeBytes {
            LogScanner.scan($0, from: 0, version: state.formatVersion) { commits.append($0) }
        }
        guard scanned.stop == .end, scanned.end == tail.count else { return false }
        for commit in commits {
            if let change = apply(commit, to: &state, isExternal: true) { delivery.enqueue(change) }
        }
        state.end = length
        state.physicalSize = max(state.physicalSize, state.end)
        return true
    }

    /// Reads the whole data file into a fresh state. Call under the file lock.
    ///
    /// Creates the file when missing. An incomplete last record (a write interrupted by a crash) is
    /// copied to `quarantine/` and cut off; any other damage makes the engine salvage every record
    /// that verifies into a rebuilt file (see `salvage`). If the quarantine copy fails, the store
    /// stays unavailable and nothing is changed.
    func reloadFully(_ state: inout EngineState) throws(TinyStorageError) {
        guard let coordination = state.coordination else {
            throw TinyStorageError(.unavailable, "The store is not open.")
        }
        let path = location.dataPath
        // A store whose data file is missing or empty (a first write that failed, a crash right
        // after creating it) may sit beside the original TinyStorage's file to adopt. It is read
        // before anything is created, so an unreadable one leaves no empty store behind.
        var adopted: LogCommit?
        switch io.status(atPath: path) {
        case .failure(Errno.notFound): adopted = try originalDataToAdopt()
        case .success(let status) where status.size == 0: adopted = try originalDataToAdopt()
        default: break
        }
        let fd: Int32
        switch io.open(path, flags: O_RDWR | O_CREAT, mode: 0o600) {
        case .success(let value): fd = value
        case .failure(let error): throw .system(error, "open", path: path)
        }
        let file = DataFile(fd: fd, io: io)
        var size: Int
        switch io.status(fd) {
        case .success(let status) where status.isRegularFile: size = status.size
        case .success: throw TinyStorageError(.unavailable, "'\(path)' is not a regular file.")
        case .failure(let error): throw .system(error, "inspect", path: path)
        }
        if size == 0 {
            size = try writeNewFile(
                fd: fd, generation: max(coordination.published.generation + 1, 1), firstCommit: adopted)
            DataProtection.removeProtection(atPath: path)
        }
        let buffer: Data
        switch io.readData(fd, count: size, at: 0) {
        case .success(let value): buffer = value
        case .failure(let error): throw .system(error, "read", path: path)
        }
        // The damaged-file paths below work on an array copy; they are rare.
        var bytes: [UInt8] { [UInt8](buffer) }
        func emptyState() -> EngineState {
            var fresh = EngineState()
            // NB: a guess from the file size saves most rehashing while loading.
            fresh.entries.reserveCapacity(max(state.entries.count, size / 128, 16))
            fresh.nextVersion = state.nextVersion
            fresh.coordination = coordination
            fresh.mirror = state.mirror
            fresh.recoveries = state.recoveries
            return fresh
        }
        var fresh = emptyState()
        switch buffer.withUnsafeBytes({ LogHeader.decode($0) }) {
        case .failure(.newerVersion(let version)):
            throw TinyStorageError(
                .unsupportedFormat,
                "'\(path)' uses format version \(version), written by a newer TinyStorage. "
                    + "Update the library; the file was left untouched.")
        case .failure(let problem):
            // A file whose header fails is salvaged only when records inside it verify: a file
            // with nothing of ours in it (another program's, or garbage) is never replaced.
            let recoverable = buffer.withUnsafeBytes {
                LogScanner.nextVerifiableRecord(
                    in: $0, after: min(LogFormat.minimumHeaderSize, $0.count) - 1, version: nil)
                    != nil
            }
            guard recoverable else { throw unrecognizedFile(problem) }
            try salvage(bytes, header: nil, into: &fresh)
        case .success(let header):
            fresh.formatVersion = header.version
            fresh.logSequence = header.baseSequence
            // NB: values are slices of one buffer holding the whole file: no allocation per value.
            // If most of the file is dead records, they are copied out below so the buffer can go.
            let scanned = buffer.withUnsafeBytes { raw in
                let origin = raw.baseAddress
                return LogScanner.scan(
                    raw, from: header.size, version: header.version,
                    makeValue: { value in
                        guard let origin, let start = value.baseAddress else { return Data() }
                        let offset = start - origin
                        return buffer[offset..<offset + value.count]
                    },
                    apply: { commit in apply(commit, to: &fresh, isExternal: true, collectChanges: false) })
            }
            if fresh.liveBytes * 2 < scanned.end {
                for (key, entry) in fresh.entries { fresh.entries[key]?.bytes = entry.bytes.detached() }
            }
            // NB: damage with no verifiable record after it is the last write, interrupted (in a
            // preallocated file a torn record is followed by zeros, so its checksum fails rather
            // than its length running past the end). Damage followed by a record that verifies is
            // corruption: cutting there would drop good records.
            let isInterruptedWrite =
                scanned.stop.offset.map { offset in
                    buffer.withUnsafeBytes {
                        LogScanner.nextVerifiableRecord(in: $0, after: offset, version: header.version)
                    } == nil
                } ?? false
            switch scanned.stop {
            case .end:
                break
            case .incomplete(let offset) where isInterruptedWrite, .corrupt(let offset, _) where isInterruptedWrite:
                try cutInterruptedWrite(bytes, at: offset, fd: fd, into: &fresh)
                size = offset
            case .incomplete, .corrupt:
                fresh = emptyState()
                try salvage(bytes, header: header, into: &fresh)
            }
            if fresh.dataFile == nil {
                fresh.generation = header.generation
                fresh.end = scanned.end
                fresh.physicalSize = size
                fresh.dataFile = file
            }
        }
        let published = coordination.published
        if !coordination.isInitialized || published.generation != fresh.generation || published.length != fresh.end {
            fresh.seenSequence = coordination.publish(generation: fresh.generation, length: fresh.end)
        } else {
            fresh.seenSequence = coordination.sequence
        }
        let wasOpen = state.isOpen
        let change = wasOpen ? Self.difference(from: state, to: fresh) : nil
        state = fresh
        if let change { delivery.enqueue(change) }
    }

    /// Writes the header of a new data file, and its first commit when there is one, then syncs
    /// the file and the directory. Returns the new size.
    private func writeNewFile(fd: Int32, generation: UInt64, firstCommit: LogCommit?) throws(TinyStorageError) -> Int {
        var bytes = LogHeader(generation: generation).encoded()
        if var firstCommit {
            firstCommit.sequence = 1
            firstCommit.encode(into: &bytes)
        }
        let result = bytes.withUnsafeBytes { io.write(fd, $0, at: 0) }
            .flatMap { io.sync(fd) }
            .flatMap { io.syncDirectory(location.directoryPath) }
        if case .failure(let error) = result {
            _ = io.truncate(fd, to: 0)
            throw .system(error, "create", path: location.dataPath)
        }
        return bytes.count
    }

    private func unrecognizedFile(_ problem: LogHeader.Problem) -> TinyStorageError {
        let path = location.dataPath
        let what =
            problem == .damaged ? "its header fails its checksum" : "it does not start like a TinyStorage data file"
        return TinyStorageError(
            .corrupted,
            "'\(path)' cannot be read as a store: \(what) and no record in it verifies. It was left "
                + "untouched; move it away to start a new store, or run `tinystorage verify` on the directory.")
    }

    /// Sets aside an incomplete last record (a write interrupted by a crash: its call never
    /// returned) and cuts the file back to the last verified record.
    private func cutInterruptedWrite(
        _ bytes: [UInt8], at offset: Int, fd: Int32, into fresh: inout EngineState
    ) throws(TinyStorageError) {
        var last = bytes.count
        while last > offset, bytes[last - 1] == 0 { last -= 1 }
        let quarantineURL = try quarantine(bytes[offset..<max(last, offset)], label: "interrupted-write")
        if case .failure(let error) = io.truncate(fd, to: offset) {
            throw .system(error, "cut the interrupted write off", path: location.dataPath)
        }
        let report = TinyStorage.RecoveryReport(
            date: Date(),
            error: TinyStorageError(
                .corrupted, "The last record of '\(location.dataPath)' was incomplete: a write was interrupted."),
            damagedRanges: [offset..<max(last, offset + 1)], recoveredRecordCount: 0,
            possiblyAffectedKeys: bytes.withUnsafeBytes {
                LogScanner.probableKeys(in: $0, range: offset..<bytes.count)
            },
            quarantineURL: quarantineURL, isInterruptedWrite: true)
        fresh.recoveries.append(report)
        logger.log(.info, report.description)
    }

    /// The keys whose bytes differ between two states, as one external change.
    private static func difference(from old: EngineState, to new: EngineState) -> ChangeSet? {
        var keys: [String] = []
        var values: [StoredValue?] = []
        for (key, entry) in new.entries where old.entries[key]?.stored != entry.stored {
            keys.append(key)
            values.append(entry.stored)
        }
        for key in old.entries.keys where new.entries[key] == nil {
            keys.append(key)
            values.append(nil)
        }
        return keys.isEmpty ? nil : ChangeSet(keys: keys, values: values, writeID: nil, isExternal: true)
    }
}
