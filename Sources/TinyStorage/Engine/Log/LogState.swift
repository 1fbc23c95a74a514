/// The log: the store's folder and data file, where the log ends, and how the next record gets
/// there. One of the components of ``EngineState``.
///
/// **Where the log ends is decided here, from the data file alone.** ``end`` is just past the
/// last record that verifies and continues the sequence. It is set only through two methods,
/// each named for what the data file showed:
/// - ``readRecords(through:)``: records that verify were read up to there. A whole read of the
///   file (`Engine.scanCommitted`), a catch-up past the records it read and checked, including
///   any the lock page did not know of (`Engine.applyTail`, Engine+CatchingUp.swift), and a file
///   a compaction or repair wrote, read back and verified before it was put in place.
/// - ``appendedRecord(ofSize:)``: this process wrote a record at ``end``, under the commit lock,
///   once ``confirmsNothingPastEnd(io:)`` found nothing there (`Engine.append`,
///   Engine+Appending.swift).
/// The lock page's published length says where to look (see ``CoordinationFile``), never where
/// the log ends: a page put back from a copy or written over may claim anything.
///
/// **Guarded by** the engine's lock (`Engine.state`). Records are written past ``end`` only while
/// the commit lock is held too (`Engine.withFileLock`), and bytes past it are cut only then
/// (``deadTailEnd``, see Engine+DeadTail.swift).
///
/// **Under the lock, code may** read the data file (`pread`, the append mapping), and write
/// records and allocate space ahead of them under the commit lock. **It never** flushes (see
/// Durability/), rewrites the file (a compaction writes its new file with no lock held), calls
/// user code, or logs (it notes, see ``EngineState/note(_:level:file:function:line:)``).
struct LogState {
    /// The store's folder, opened again on every full reload.
    var folder: StoreFolder?
    /// The data file this state read: `nil` until the store opens (or in memory).
    var dataFile: DataFile?
    /// Linux: the mapping of ``dataFile`` commits copy their records into (see ``AppendMapping``).
    var appendMapping: AppendMapping?
    /// The data file's generation (bumped by every compaction or repair that replaces it).
    var generation: UInt64 = 0
    /// Offset just past the last committed record (see the type's documentation).
    private(set) var end = 0
    /// The data file's format version: a version 1 file is rewritten as the current version
    /// before anything is appended to it.
    var formatVersion = LogFormat.version
    /// The sequence number of the data file's last record (the header's base when it has none).
    var sequence: UInt64 = 0
    /// The data file's header: where its numbering starts, and how many records at its start are
    /// a snapshot of the file it replaced (see ``LogHeader/snapshotRecords``).
    var baseSequence: UInt64 = 0
    var snapshotRecords: UInt32 = 0
    /// How far bytes other than zeros were seen past the log's end (``end``): the remains of an
    /// append whose process died, or of a disk that lost part of its cache, to be cut off (and
    /// set aside) under the commit lock before anything is appended; `Int.max` when their end is
    /// not known (up to the file's end), 0 when none were seen. (Seen without the lock, they may
    /// also be an append under way: under the lock, what has become records is kept.)
    var deadTailEnd = 0
    /// Where commits up to ``Engine/recordBufferLimit`` bytes are encoded before they are written,
    /// reused so a commit allocates no buffer.
    var recordBuffer: [UInt8] = []
    /// The log's length from which a commit that leaves it worth compacting asks for a
    /// compaction again; `0` for a file nobody asked about yet.
    ///
    /// NB: while a compaction runs, every commit used to ask for one (about 80 instructions,
    /// for nothing: one was scheduled), and after a failed one (a full disk) every commit started
    /// another. Now one asks, then one every ``Engine/compactionRequestInterval`` of log.
    var nextCompactionRequest = 0

    /// Records that verify and continue the sequence were read from the data file up to
    /// `offset`: the log ends there.
    @inline(__always)
    mutating func readRecords(through offset: Int) {
        end = offset
    }

    /// This process wrote a record of `size` bytes at ``end``, under the commit lock, after
    /// ``confirmsNothingPastEnd(io:)``: the log ends after it.
    @inline(__always)
    mutating func appendedRecord(ofSize size: Int) {
        end += size
    }

    /// Whether ``deadTailEnd`` asks for a look under the commit lock.
    var mayHaveDeadTail: Bool {
        get { deadTailEnd > end }
        set { deadTailEnd = newValue ? .max : 0 }
    }

    /// Whether the data file holds nothing at ``end`` (zeros, or its end): so no record another
    /// process appended lies there, whatever the lock page says. Asked under the commit lock,
    /// before an append or a rewrite (see `Engine.holdsEveryRecord`); `true` with no file.
    ///
    /// NB: one frame read: from the mapping where appends go through one (no system call), else
    /// one `pread`.
    @inline(__always)
    func confirmsNothingPastEnd(io: FileIO) -> Bool {
        guard let file = dataFile else { return true }
        let end = end
        if appendMapping?.covers(file, through: end + LogFormat.frameSize) == true, let base = appendMapping?.base {
            // NB: one 8-byte load (a frame is 8 bytes): a byte loop over it cost an `Int`
            // overwrite about 12% in the benchmark.
            return UnsafeRawPointer(base).loadUnaligned(fromByteOffset: end, as: UInt64.self) == 0
        }
        guard case .success(let frame) = io.read(file.fd, count: LogFormat.frameSize, at: end) else { return false }
        return frame.allSatisfy { $0 == 0 }
    }
}
