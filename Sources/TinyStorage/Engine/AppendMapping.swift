/// Linux: a shared, writable mapping of a data file's first ``length`` bytes, all of them
/// allocated on disk, into which commits copy their records: an append is a `memcpy`, with no
/// system call.
///
/// Only used where the commit lock is the shared mutex (see ``CommitLock``), because two things
/// make it safe there:
/// - **No SIGBUS from a full disk.** The space is allocated with `posix_fallocate(3)` before it
///   is mapped (never a sparse file), in steps of ``step``: a full disk fails that call, which
///   the commit reports as `.noSpace` with nothing written.
/// - **No SIGBUS from a shrinking file.** No process of this version ever truncates a data file
///   there: what lies past the committed length (preallocated zeros, or the remains of a writer
///   that died holding the lock) is overwritten with zeros, never cut off, and a compaction
///   replaces the file by renaming a new one over it, so the old one stays whole for whoever
///   still has it mapped. A dead writer is reported by the mutex (`EOWNERDEAD`), so a data file
///   longer than its committed length needs no look at all.
///
/// Visibility and durability are unchanged: a mapping shares the page cache with `pread(2)`, so
/// readers in every process see the bytes once the length is published, and `fdatasync(2)`
/// writes back pages dirtied through a mapping as it does any other (the crash simulator's
/// `sync` takes in what its mappings hold, the same way).
final class AppendMapping {
    /// How much space is allocated ahead of the committed length at a time.
    static let step = 256 << 10

    /// The file mapped; the mapping serves only it (a compaction's new file gets its own).
    let file: DataFile
    let base: UnsafeMutableRawPointer
    /// Bytes mapped, all of them within the file and allocated.
    let length: Int
    private let io: FileIO

    private init(file: DataFile, base: UnsafeMutableRawPointer, length: Int, io: FileIO) {
        self.file = file
        self.base = base
        self.length = length
        self.io = io
    }

    deinit { io.unmap(base, length: length) }

    /// Maps `file` so that bytes up to `end` can be written: first allocates space up to the next
    /// multiple of ``step`` (`posix_fallocate(3)`) when the file is shorter, then maps all of it
    /// (`mmap(2)`).
    static func make(for file: DataFile, through end: Int, io: FileIO) -> Result<AppendMapping, Errno> {
        let size: Int
        switch io.status(file.fd) {
        case .success(let status): size = status.size
        case .failure(let error): return .failure(error)
        }
        let target = (end + step - 1) / step * step
        if size < target, case .failure(let error) = io.allocate(file.fd, offset: size, length: target - size) {
            return .failure(error)
        }
        let length = max(size, target)
        return io.mapShared(file.fd, length: length).map {
            AppendMapping(file: file, base: $0, length: length, io: io)
        }
    }

    /// Writes `commit`'s record (`size` bytes) at `offset`, which with the record must lie
    /// within ``length``. Fails only on a simulated disk that crashes there (see
    /// ``FileSystem/willWriteMapping(_:offset:length:)``).
    func write(_ commit: LogCommit, at offset: Int, size: Int) -> Result<Void, Errno> {
        precondition(offset >= 0 && offset + size <= length, "a record past the mapped space")
        if case .failure(let error) = io.willWriteMapping(base, offset: offset, length: size) { return .failure(error) }
        commit.write(into: UnsafeMutableRawBufferPointer(start: base + offset, count: size))
        return .success(())
    }
}
