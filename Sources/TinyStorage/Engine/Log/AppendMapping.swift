import Dispatch

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Linux: a shared, writable mapping of a data file, into whose first ``allocated`` bytes, all
/// of them within the file and allocated on disk, commits copy their records: an append is a
/// `memcpy`, with no system call.
///
/// The mapping reserves more address space than the file has bytes (see
/// ``reservation(for:)``), so that the file grows into it without being mapped again, and the
/// pages just ahead of the log are faulted in on a background queue before commits reach them
/// (see ``prepare(ahead:)``): the committing thread then copies, taking neither faults nor
/// system calls, except at the few commits that allocate more of the file.
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
/// - **No SIGBUS from the space reserved past the file's end.** Nothing touches a page there:
///   commits write, and pages are faulted in, only below ``allocated``.
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
    /// The least address space a mapping reserves: the file grows into it without being mapped
    /// again (see ``reservation(for:)``).
    static let minimumReservation = 64 << 20
    /// How far ahead of the log pages are faulted in before commits write them (see
    /// ``prepare(ahead:)``): about one flush interval of a fast writer's log, and a bound on the
    /// zeros a writeback may write ahead of it.
    static let preparedAhead = 64 << 10

    /// The size a data file is given, all of it allocated, so that `end` bytes fit: half as
    /// much again as the log needs (at most ``maximumAhead`` more), rounded up to a multiple of
    /// ``granularity``. A small store takes 64 KiB of disk; commits of 40-byte records pay for
    /// an allocation once every 800 or more, less often as the log grows.
    static func allocatedSize(through end: Int) -> Int {
        let wanted = end + min(end / 2, maximumAhead)
        return (wanted + granularity - 1) / granularity * granularity
    }

    /// The address space mapped for a file of `length` bytes: at least ``minimumReservation``,
    /// twice the file when it is larger, so that a file is mapped again only when it has doubled.
    static func reservation(for length: Int) -> Int {
        let wanted = max(minimumReservation, 2 * length)
        return (wanted + granularity - 1) / granularity * granularity
    }

    /// The file mapped; the mapping serves only it (a compaction's new file gets its own).
    let file: DataFile
    private let region: Region
    /// Bytes from the start of the file that lie within it and are allocated: commits write
    /// only there (a page mapped past the file's end is `SIGBUS`).
    private(set) var allocated: Int
    /// Pages up to here are faulted in, or queued to be (see ``prepare(ahead:)``).
    private var preparedEnd = 0
    /// An append reaching past this goes through ``makeRoom(through:)`` first, which allocates
    /// more of the file or prepares more pages; never past ``allocated``.
    private var stepEnd = 0
    private let io: FileIO

    var base: UnsafeMutableRawPointer { region.base }

    private init(file: DataFile, region: Region, allocated: Int, io: FileIO) {
        self.file = file
        self.region = region
        self.allocated = allocated
        self.io = io
    }

    /// Maps `file` so that bytes from `start` (the log's end) up to `end` can be written: first
    /// allocates (`posix_fallocate(3)`) everything from `start` to the end of the file, which
    /// grows to ``allocatedSize(through:)`` when it is shorter than `end`, then maps
    /// ``reservation(for:)`` bytes of it (`mmap(2)`), past its end, so that it grows without
    /// being mapped again. NB: space this library allocated before is allocated again at no cost;
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
        return Region.map(file.fd, reserving: reservation(for: length), atLeast: length, io: io).map { region in
            let mapping = AppendMapping(file: file, region: region, allocated: length, io: io)
            mapping.prepare(ahead: end)
            return mapping
        }
    }

    /// Whether commits may copy a record ending at `end` into this mapping of `file` without
    /// ``makeRoom(through:)`` first.
    @inline(__always)
    func covers(_ file: DataFile?, through end: Int) -> Bool {
        self.file === file && end <= stepEnd
    }

    /// Makes the bytes up to `end` writable: when they lie past ``allocated``, allocates more
    /// of the file (`posix_fallocate(3)`, from ``allocated`` to ``allocatedSize(through:)``, or
    /// to the file's end when another process made it longer), then queues the pages ahead to
    /// be faulted in (see ``prepare(ahead:)``).
    ///
    /// - Returns: `false` when `end` lies past the address space this mapping reserved (a new
    ///   mapping is needed), with nothing changed.
    func makeRoom(through end: Int) -> Result<Bool, Errno> {
        if end > allocated {
            let size: Int
            switch io.status(file.fd) {
            case .success(let status): size = status.size
            case .failure(let error): return .failure(error)
            }
            let length = size < end ? Self.allocatedSize(through: end) : size
            guard length <= region.length else { return .success(false) }
            if case .failure(let error) = io.allocate(file.fd, offset: allocated, length: length - allocated) {
                return .failure(error)
            }
            allocated = length
        }
        prepare(ahead: end)
        return .success(true)
    }

    /// Queues the pages from `end` to ``preparedAhead`` past it (within ``allocated``) to be
    /// faulted in on a background queue, and sets where the next commit comes back here.
    ///
    /// NB: the first write to a page of allocated, never written space costs the kernel 4–6 µs
    /// on this project's ext4 (a fault, a page zeroed and added to the cache, the file system
    /// told it is dirty): a 150-byte record paid about 160 ns of it, more than the rest of its
    /// commit's append. Faulted in ahead, off the committing thread, the write is a copy. The
    /// pages are then dirty: a writeback before the log reaches them writes their zeros, at
    /// most ``preparedAhead`` bytes ahead of it (a page written slowly is written back several
    /// times anyway).
    private func prepare(ahead end: Int) {
        let pageSize = Self.pageSize
        let from = max(preparedEnd, (end + pageSize - 1) / pageSize * pageSize)
        let through = min(allocated, (end + Self.preparedAhead + pageSize - 1) / pageSize * pageSize)
        if from < through {
            preparedEnd = through
            let region = region
            Self.preparing.async { region.prefault(offset: from, length: through - from) }
        }
        // NB: back here halfway through the pages prepared, so they stay ahead of a fast writer.
        stepEnd = through >= allocated ? allocated : max(end, through - Self.preparedAhead / 2)
    }

    /// Writes `commit`'s record (`size` bytes) at `offset`, which with the record must lie
    /// within ``allocated``. Fails only on a simulated disk that crashes there (see
    /// ``FileSystem/willWriteMapping(_:offset:length:)``).
    func write(_ record: some LogRecord, at offset: Int, size: Int) -> Result<Void, Errno> {
        precondition(offset >= 0 && offset + size <= allocated, "a record past the allocated space")
        if case .failure(let error) = io.willWriteMapping(base, offset: offset, length: size) { return .failure(error) }
        record.write(into: UnsafeMutableRawBufferPointer(start: base + offset, count: size))
        return .success(())
    }

    /// The queue pages are faulted in on, for every store of the process, one range at a time.
    private static let preparing = DispatchQueue(label: "TinyStorage.prefault", qos: .utility)

    /// Returns once the pages queued so far are faulted in (tests, benchmarks).
    static func waitForPreparedPages() {
        preparing.sync {}
    }

    private static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    /// The address space mapped for a file (`mmap(2)`), unmapped when the last reference goes:
    /// the mapping's, or a queued ``prefault(offset:length:)``'s.
    final class Region: @unchecked Sendable {
        // @unchecked: every property is immutable; the memory itself is written under the
        // engine's lock, and only the kernel touches it here.
        let base: UnsafeMutableRawPointer
        let length: Int
        private let io: FileIO

        private init(base: UnsafeMutableRawPointer, length: Int, io: FileIO) {
            self.base = base
            self.length = length
            self.io = io
        }

        deinit { io.unmap(base, length: length) }

        /// Maps `reservation` bytes of `fd`; where the process may not have that much address
        /// space (`ENOMEM`, a limit set with `ulimit -v`), `length` only.
        static func map(
            _ fd: Int32, reserving reservation: Int, atLeast length: Int, io: FileIO
        ) -> Result<Region, Errno> {
            var mapped = io.mapShared(fd, length: reservation).map { Region(base: $0, length: reservation, io: io) }
            if case .failure(Errno(ENOMEM)) = mapped, reservation > length {
                mapped = io.mapShared(fd, length: length).map { Region(base: $0, length: length, io: io) }
            }
            return mapped
        }

        /// Faults in `length` bytes at `offset` for writing; a failure changes nothing (the
        /// commit that writes there faults the page in itself).
        func prefault(offset: Int, length: Int) {
            _ = io.prefaultForWriting(base, offset: offset, length: length)
        }
    }
}
