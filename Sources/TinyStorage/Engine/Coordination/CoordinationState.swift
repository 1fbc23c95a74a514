/// What this process knows of the lock page: the lock file, and the page's commit counter as of
/// the state's last look. One of the components of ``EngineState``.
///
/// **Owns** the answer to "has another process committed since this state last looked?"
/// (``EngineState/isCurrent``): the page's counter (bumped by every commit, compaction and repair
/// in any process) against ``seenSequence``. That answer is a hint: it may send a read down the
/// path that looks at the data file, but what the state holds is decided by the data file (see
/// ``LogState``), and an append under the commit lock checks the file too
/// (`Engine.holdsEveryRecord`).
///
/// **Guarded by** the engine's lock (`Engine.state`). ``seenSequence`` moves only after the
/// records it stands for were read (a catch-up reads the counter first, so a commit made while
/// it reads is not marked seen), and is mirrored for the file watch's lock-free look
/// (``SequenceMirror``). The commit lock itself is taken in Commit/Engine+Locking.swift, through
/// ``CoordinationFile/lock(excludingOlderVersions:)``.
///
/// **Under the lock, code may** read and write the page (atomic loads and stores). **It never**
/// waits on the page's change signal, flushes, or calls out.
struct CoordinationState {
    /// The store's lock file, opened once with the store and kept across reloads.
    var file: CoordinationFile?
    /// The page's commit counter when this state was last brought up to date.
    var seenSequence: UInt64 = 0 {
        didSet { mirror?.store(seenSequence) }
    }
    /// A lock-free copy of ``seenSequence``, for the change watch's cheap "anything new?" check.
    var mirror: SequenceMirror?
}
