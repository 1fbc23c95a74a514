/// Linux: a shared, writable mapping of a data file's first ``length`` bytes, all of them
/// allocated on disk, into which commits copy their records: an append is a `memcpy`, with no
/// system call.
///
/// Only used where the commit lock is the shared mutex (see ``CommitLock``) and the file system
/// is one of ``fileSystemsKeepingAllocatedSpace``, because two things make it safe there:
/// - **No SIGBUS from a full disk.** The space is allocated with `posix_fallocate(3)` before it
///   is mapped (never a sparse file), ahead of the log (see ``allocatedSize(through:)``): a
///   full disk fails that call, which the commit reports as `.noSpace` with nothing written.
///   On copy-on-write file systems (btrfs, ZFS, bcachefs) and others not known to keep that
///   promise, writing a page again may need new blocks, and a full disk would end the process
///   with `SIGBUS`: there commits append with `pwrite(2)` instead.
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
    /// The file systems (`statfs` types) on which space `posix_fallocate` allocated is written in
    /// place, so that writing through a mapping needs no new blocks: ext2/3/4, XFS, tmpfs.
    static let fileSystemsKeepingAllocatedSpace: Set<Int64> = [ext4, xfs, tmpfs]
    /// Their `statfs` types (`f_type`); ext2 and ext3 report ext4's.
    static let ext4: Int64 = 0xEF53
    static let xfs: Int64 = 0x5846_5342
    static let tmpfs: Int64 = 0x0102_1994

    /// Whether commits to the file open on `fd` may copy their records into a mapping of it: its
    /// file system is one of ``fileSystemsKeepingAllocatedSpace``. Every process sharing the
    /// file comes to the same answer; one that cannot tell appends with `pwrite`.
    static func isSafe(for fd: Int32, io: FileIO) -> Bool {
        guard case .success(let type) = io.fileSystemType(fd) else { return false }
        return fileSystemsKeepingAllocatedSpace.contains(type)
    }

    /// Space is allocated in multiples of this.
    static let granularity = 64 << 10
    /// The most allocated ahead of the log at a time.
    static let maximumAhead = 1 << 20

    /// The size a data file is given, all of it allocated, so that `end` bytes fit: half as
    /// much again as the log needs (at most ``maximumAhead`` more), rounded up to a multiple of
    /// ``granularity``. A small store takes 64 KiB of disk; commits of 40-byte records pay for
    /// an allocation (and a new mapping) once every 800 or more, less often as the log grows.
    static func allocatedSize(through end: Int) -> Int {
        let wanted = end + min(end / 2, maximumAhead)
        return (wanted + granularity - 1) / granularity * granularity
    }

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

    /// Maps `file` so that bytes from `start` (the log's end) up to `end` can be written: first
    /// allocates (`posix_fallocate(3)`) everything from `start` to the end of the file, which
    /// grows to ``allocatedSize(through:)`` when it is shorter than `end`, then maps the whole
    /// file (`mmap(2)`). NB: space this library allocated before is allocated again at no cost;
    /// the call is for a file another program made longer without allocating it (a sparse
    /// tail), where a write on a full disk would otherwise be `SIGBUS`.
    static func make(for file: DataFile, from start: Int, through end: Int, io: FileIO) -> Result<AppendMapping, Errno>
    {
        let size: Int
        switch io.status(file.fd) {
        case .success(let status): size = status.size
        case .failure(let error): return .failure(error)
        }
        let length = size < end ? allocatedSize(through: end) : size
        if case .failure(let error) = io.allocate(file.fd, offset: start, length: length - start) {
            return .failure(error)
        }
        // NB: never past the file's end: a page there has nothing behind it (SIGBUS).
        return io.mapShared(file.fd, length: length).map {
            AppendMapping(file: file, base: $0, length: length, io: io)
        }
    }

    /// Whether this maps `file` through at least `end`.
    @inline(__always)
    func covers(_ file: DataFile?, through end: Int) -> Bool {
        self.file === file && end <= length
    }

    /// Writes `commit`'s record (`size` bytes) at `offset`, which with the record must lie
    /// within ``length``. Fails only on a simulated disk that crashes there (see
    /// ``FileSystem/willWriteMapping(_:offset:length:)``).
    func write(_ record: some LogRecord, at offset: Int, size: Int) -> Result<Void, Errno> {
        precondition(offset >= 0 && offset + size <= length, "a record past the mapped space")
        if case .failure(let error) = io.willWriteMapping(base, offset: offset, length: size) { return .failure(error) }
        record.write(into: UnsafeMutableRawBufferPointer(start: base + offset, count: size))
        return .success(())
    }
}
