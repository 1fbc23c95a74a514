import Foundation

// Where records are written: at the log's end (``LogState/end``), under the commit lock, once
// the data file confirmed nothing lies there (`Engine.holdsEveryRecord`, Engine+CatchingUp.swift).
// Linux copies records into a mapping of space allocated ahead (``AppendMapping``); elsewhere,
// or where the file system cannot be trusted to write allocated space in place, `pwrite(2)`.
// Either way the record is published on the lock page after it is written, never before, and
// a failed write leaves nothing that could later read as a commit.

extension Engine {
    /// Appends one record at `state.log.end` and publishes it. Call under the file lock.
    ///
    /// NB: the usual case, a record that fits in the file's mapping, takes no reference to the
    /// files out of `state`: each one bound across the append was retained and released, 80
    /// instructions of an overwrite's 2,950.
    ///
    /// - Returns: Whether the record was copied into `state.log.appendMapping` (else written with
    ///   `pwrite`, or kept in memory only).
    @inline(__always)
    @discardableResult
    func append(_ record: some LogRecord, to state: inout EngineState) throws(TinyStorageError) -> Bool {
        if state.inMemory { return false }
        let size = record.encodedSize
        let end = state.log.end
        let mapped: Bool
        // NB: called through the optionals, not bound: a bound reference was retained and released.
        if state.log.appendMapping?.covers(state.log.dataFile, through: end + size) == true {
            if case .failure(let error)? = state.log.appendMapping?.write(record, at: end, size: size) {
                throw .system(error, "append to", path: location.dataPath)
            }
            state.log.appendedRecord(ofSize: size)
            mapped = true
        } else {
            mapped = try appendOutsideMapping(record, size: size, to: &state)
        }
        guard let sequence = state.coordination.file?.publish(generation: state.log.generation, length: state.log.end)
        else {
            throw TinyStorageError(.unavailable, "The store is not open.")
        }
        state.coordination.seenSequence = sequence
        return mapped
    }

    /// ``append(_:to:)`` for a record the current mapping cannot take: maps more of the file
    /// (or maps it first), or writes with `pwrite` where commits do not append through a mapping.
    ///
    /// - Returns: Whether the record was copied into the mapping.
    private func appendOutsideMapping(
        _ record: some LogRecord, size: Int, to state: inout EngineState
    ) throws(TinyStorageError) -> Bool {
        guard let file = state.log.dataFile, let coordination = state.coordination.file else {
            throw TinyStorageError(.unavailable, "The store is not open.")
        }
        if appendsThroughMapping(file, coordination) {
            try appendThroughMapping(record, size: size, to: file, &state)
            return true
        } else {
            try appendWithWrite(record, size: size, to: file, &state)
            return false
        }
    }

    /// Whether commits to `file` copy their records into a mapping of it: where the commit lock
    /// reports dead holders (so nothing past the committed length needs a look) and the file
    /// system writes allocated space in place (see ``AppendMapping``). Every process sharing the
    /// file answers the same; then none ever makes it shorter.
    func appendsThroughMapping(_ file: DataFile, _ coordination: CoordinationFile) -> Bool {
        coordination.reportsDeadHolders && file.allowsMappedAppends
    }

    /// Copies the record into the file's mapping (see ``AppendMapping``), first allocating more
    /// of the file, or mapping it (again, when it has outgrown the address space reserved),
    /// when the mapping does not reach that far.
    private func appendThroughMapping(
        _ record: some LogRecord, size: Int, to file: DataFile, _ state: inout EngineState
    ) throws(TinyStorageError) {
        let end = state.log.end + size
        var madeRoom = false
        if let mapping = state.log.appendMapping, mapping.file === file {
            switch mapping.makeRoom(through: end) {
            case .success(let done): madeRoom = done
            case .failure(let error): throw .system(error, "make room for the change in", path: location.dataPath)
            }
        }
        if !madeRoom {
            state.log.appendMapping = nil  // NB: unmapped before the file is mapped again
            switch AppendMapping.make(for: file, from: state.log.end, through: end, io: io) {
            case .success(let mapping): state.log.appendMapping = mapping
            case .failure(let error): throw .system(error, "make room for the change in", path: location.dataPath)
            }
        }
        if case .failure(let error) = state.log.appendMapping?.write(record, at: state.log.end, size: size) {
            throw .system(error, "append to", path: location.dataPath)
        }
        state.log.appendedRecord(ofSize: size)
    }

    /// Writes the record with `pwrite(2)`, removing whatever part of it reached the file when
    /// that fails.
    private func appendWithWrite(
        _ record: some LogRecord, size: Int, to file: DataFile, _ state: inout EngineState
    )
        throws(TinyStorageError)
    {
        let end = state.log.end
        let written: Result<Void, Errno>
        if size <= Self.recordBufferLimit {
            if state.log.recordBuffer.count < size {
                state.log.recordBuffer = [UInt8](repeating: 0, count: Self.recordBufferLimit)
            }
            written = state.log.recordBuffer.withUnsafeMutableBytes { raw in
                let buffer = UnsafeMutableRawBufferPointer(rebasing: raw[..<size])
                record.write(into: buffer)
                return io.write(file.fd, UnsafeRawBufferPointer(buffer), at: end)
            }
        } else {
            written = record.encoded().withUnsafeBytes { io.write(file.fd, $0, at: end) }
        }
        if case .failure(let error) = written {
            // NB: remove whatever part of the record reached the file so a later open cannot see
            // a commit we reported as failed (flushed once the lock is let go, before the error
            // is thrown: see `cutOff`, which every cut goes through).
            if let coordination = state.coordination.file {
                _ = cutOff(from: 0, in: file, holding: [], coordination, at: end)
            }
            throw .system(error, "append to", path: location.dataPath)
        }
        state.log.appendedRecord(ofSize: size)
    }
}
