import CTinyStorageShims

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The lock file beside a store's data file: a page shared by every process through `mmap(2)`,
/// holding counters and, on Linux, the cross-process commit lock (see ``CommitLock``; elsewhere
/// that lock is a `flock(2)` on this file).
///
/// ```text
/// offset 0  magic       "TSLOCK" 0x00 0x01 once initialized
/// offset 8  generation  of the data file (bumped by compaction and repairs)
/// offset 16 length      the data file's committed length
/// offset 24 sequence    bumped after every commit, compaction or repair
/// offset 32 boot        the boot (two u64) during which the page was last validated
/// offset 48 (unused)    was a durable length, which nothing read
/// offset 56 (unused)    was the generation whose file name was durable (see offset 272)
/// offset 64 signal      u32 bumped after every publish; Linux processes sleep on it (futex)
/// offset 68 sleepers    u32 flag a thread raises before it sleeps on `signal` (in any process)
/// offset 72 stamp       odd while generation and length are being changed (a sequence lock)
/// offset 80 mutexStamp  "SMUTEX" 0x00 0x01, then the boot (two u64) during which the mutex was
///                       initialized (Linux; see SharedMutexCommitLock)
/// offset 128 mutex      the commit lock: a robust, process-shared pthread_mutex_t (Linux)
/// offset 256 identity   the device and inode (two u64) of the file this page belongs to
/// offset 272 nameSynced the inode of the data file whose name is durable (its folder synced)
/// offset 280 temporaries non-zero once a temporary file was created in the folder, until an open
///                       found none left by a dead process
/// offset 288 cuts       bumped by every cut of the data file's end (under the lock)
/// offset 296 cutsFlushed the value of `cuts` when the last flush of the data file began
/// ```
///
/// **The data file is the only truth; this page is a hint.** Nothing read here decides where
/// the log ends, where the next record goes, or what is "not found" until the data file confirms
/// it (see `Engine.load` and `Engine.applyTail`):
/// - The log ends where the last record that verifies, and continues the sequence, ends,
///   whatever `length` says. An open reads the whole file; a catch-up reads what the page says
///   is new and one frame past it, and reads on while records verify there (a page behind the
///   file: a store folder restored from a copy taken while it was in use, a disk that lost its
///   cache without a restart). Under the commit lock, anything else past the end is the remains
///   of a dead writer, cut and set aside before an append.
/// - Bytes the page says were committed that do not verify (a page ahead of the file) have the
///   file checked from its start; only the data file's own durable mark tells damage from the
///   power-loss window.
/// - A page from another boot, a generation that still differs from the file's once the lock was
///   taken, or a page copied from another file (its `identity` is not this file's), is not used
///   at all: the file is checked from its start and the page published anew.
/// - The flushes reach as far as the process has verified, never as far as the page claims.
///
/// **One lock file for every process.** A process that has the store open holds a shared
/// `flock(2)` on the store's folder for as long as it has this page. The lock file is created,
/// or a foreign page (a copy, or one another program put there) taken over, only under an
/// exclusive `flock` on the folder, which nobody with the store open lets anyone take: so when
/// `store.lock` was removed or replaced while processes had the store open (they go on using the
/// file they opened), a new process refuses to open the store, with a clear error, rather than
/// commit under another lock; it opens once those processes have closed it.
///
/// Writers change the page only while holding the lock, except the flush mark, which only
/// grows. Readers load `sequence` without any system call: when it equals the value they last saw,
/// no other process has committed since, so a cached read is current. The page only says where
/// to look, and only for the boot that wrote it: after a restart (or a power loss) a page from an
/// earlier boot is ignored and the data file is checked from its start.
///
/// A lock file written before the mutex existed has zeros from offset 80 on, and gets its mutex
/// when first opened; its other fields keep their places. NB: on Linux, a process running a
/// build from before the mutex (no release had it), which takes `flock` for every commit, must
/// not share a store with one running this build: the two locks do not exclude each other.
///
/// The first 32 bytes are laid out as version 1 of this library left them, so a process still
/// running the older version (which only ever uses those) keeps working beside this one until the
/// data file is upgraded, which it then refuses to read.
final class CoordinationFile: @unchecked Sendable {
    // @unchecked: `page` is shared memory accessed only through atomic loads and stores, and
    // the fields other than `sequence` and the flush marks are written only under the commit lock.
    static let size = 4096
    static let magic: UInt64 = 0x0100_4B43_4F4C_5354  // "TSLOCK\0\u{1}" little-endian

    let path: String
    private let fd: Int32
    let page: UnsafeMutableRawPointer
    private let io: FileIO
    /// What every commit takes: the page's mutex where there is one (Linux), `flock` on this
    /// file otherwise (see ``lock(excludingOlderVersions:)``).
    ///
    /// NB: two stored locks (classes, so calling one copies nothing) rather than one
    /// `any CommitLock`: calling through the existential cost each commit about 50 instructions.
    private let sharedMutex: SharedMutexCommitLock?
    private let fileLock: FileCommitLock
    /// This boot, as the page records it.
    let boot: BootIdentity

    /// The store's folder, whose descriptor holds this process's shared `flock`, the sign that
    /// it has the store open (see the type's documentation), for as long as the page is mapped.
    private let presence: StoreFolder
    /// Mapped read-only, for a read-only store (``init(readingIn:name:)``): nothing here is ever
    /// written, and the commit lock is never taken.
    let isReadOnly: Bool

    /// Where the page records which file it belongs to (device, inode), and where it records the
    /// data file whose name is durable.
    static let identityOffset = 256
    static let nameSyncedOffset = 272
    /// Where the page notes that a temporary file may have been left in the folder.
    static let temporariesOffset = 280
    /// Where the page counts cuts of the data file's end, and how many a flush covered.
    static let cutsOffset = 288
    static let cutsFlushedOffset = 296

    /// Opens (creating if needed, mode 0600) and maps the lock file `name` in `folder`, the one
    /// every process that has the store open uses (see the type's documentation).
    ///
    /// - Parameter sharedMutex: Whether the commit lock is the page's mutex where there is one
    ///   (Linux); `false` takes `flock(2)` as Apple platforms do (see `Engine.Options.usesFileLock`).
    /// - Throws: `.unsafeFile` when something else than the store's own file is there;
    ///   `.unavailable` when the lock file was removed or replaced while another process had the
    ///   store open; or the system error.
    init(in folder: StoreFolder, name: String, sharedMutex: Bool = true) throws(TinyStorageError) {
        let path = folder.path(of: name)
        self.path = path
        self.io = folder.io
        self.boot = folder.io.fileSystem.bootIdentity
        self.presence = folder
        let io = folder.io
        let (fd, page, alone) = try Self.openSharedPage(in: folder, name: name)
        do throws(Errno) {
            let mutex =
                try sharedMutex
                ? SharedMutexCommitLock.attach(
                    to: page, fd: fd, io: io, boot: folder.io.fileSystem.bootIdentity, alone: alone) : nil
            self.sharedMutex = mutex
            self.fileLock = FileCommitLock(fd: fd, io: io)
        } catch {
            io.unmap(page, length: Self.size)
            io.close(fd)
            _ = io.lock(folder.directory.fd, .unlocked)
            throw .system(error, "open the lock file", path: path)
        }
        self.page = page
        self.fd = fd
        self.isReadOnly = false
        // NB: what a process killed while it wrote a new data file (a compaction's, a repair's)
        // left behind; a file still being written is left alone (see `StoreFolder`).
        if ts_atomic_load_u64(page + Self.temporariesOffset) != 0 {
            ts_atomic_store_u64(page + Self.temporariesOffset, 0)
            if folder.removeAbandonedTemporaryFiles() > 0 { noteTemporaryFile() }
        }
        // NB: from exclusive to shared once the page is ready: others may open the store now.
        if alone, case .failure = io.lock(folder.directory.fd, .shared) { _ = io.lock(folder.directory.fd, .unlocked) }
    }

    /// Opens and maps the lock file read-only, for a store opened read-only: creates nothing and
    /// writes nothing, here or in the page. The page is used only once a process that may write
    /// the store has stamped it as this file's (see the type's documentation); this process then
    /// holds the folder's shared lock like any other, so no writer takes the page for a foreign one
    /// while it reads it.
    ///
    /// - Throws: `.unavailable` when there is no lock file yet, or its page was not made ready by
    ///   a writer; `.unsafeFile` when something else than the store's own file is there; or the
    ///   system error (`.permissionDenied` when this process may not read it).
    init(readingIn folder: StoreFolder, name: String) throws(TinyStorageError) {
        let path = folder.path(of: name)
        let io = folder.io
        let notReady = { (reason: String) in
            TinyStorageError(
                .unavailable,
                "The store is opened read-only and its lock file '\(path)' \(reason), which only a process that "
                    + "may write the store can fix by opening it. This store looks again when the folder changes.")
        }
        guard let (fd, opened) = try folder.openFileWithStatus(name, writable: false, creation: .never) else {
            throw notReady("does not exist yet")
        }
        let status: FileStatus
        switch opened.map({ .success($0) }) ?? io.status(fd) {
        case .success(let value): status = value
        case .failure(let error):
            io.close(fd)
            throw .system(error, "inspect", path: path)
        }
        guard status.size >= Self.size else {
            io.close(fd)
            throw notReady("is shorter than its page")
        }
        // NB: shared, waiting for a process that holds it exclusively to open the store (it does
        // so for microseconds); where folders take no `flock`, the page is used as it is.
        let present: Bool
        if case .success = io.lock(folder.directory.fd, .shared) { present = true } else { present = false }
        let page: UnsafeRawPointer
        switch io.mapReadOnly(fd, length: Self.size) {
        case .success(let mapped): page = mapped
        case .failure(let error):
            if present { _ = io.lock(folder.directory.fd, .unlocked) }
            io.close(fd)
            throw .system(error, "open the lock file", path: path)
        }
        let stamped =
            ts_atomic_load_u64(UnsafeMutableRawPointer(mutating: page) + Self.identityOffset) == status.device
            && ts_atomic_load_u64(UnsafeMutableRawPointer(mutating: page) + Self.identityOffset + 8) == status.inode
        guard stamped else {
            io.unmap(UnsafeMutableRawPointer(mutating: page), length: Self.size)
            io.close(fd)
            if present { _ = io.lock(folder.directory.fd, .unlocked) }
            throw notReady("was not made ready for this store's file")
        }
        self.path = path
        self.io = io
        self.boot = io.fileSystem.bootIdentity
        self.presence = folder
        self.fd = fd
        // NB: typed mutable for the rest of the type's code, which only reads it in this mode.
        self.page = UnsafeMutableRawPointer(mutating: page)
        self.sharedMutex = nil
        self.fileLock = FileCommitLock(fd: fd, io: io)
        self.isReadOnly = true
    }

    /// How many times ``openSharedPage(in:name:)`` looks before it gives up: another process
    /// opening the store holds the folder's exclusive lock for microseconds.
    private static let openAttempts = 100

    /// Opens and maps the lock file, and takes the folder's shared presence lock: returns only
    /// once the page is this file's (stamped with its identity) and the name still leads to it.
    ///
    /// A process that finds no other with the store open (it gets the folder's exclusive lock)
    /// creates the lock file when it is missing, stamps a page that does not name this file (new,
    /// written by an earlier version, or copied from elsewhere: then reset first, since whatever
    /// it says belongs to another file), and has the page's mutex made again before it is used:
    /// nobody can hold it, whatever the page says (a page put back from a copy, or one a disk
    /// that lost its cache brought back, may say a thread holds it). Then it lets others in.
    /// A process that finds others with the store open uses the lock file only when its page is
    /// stamped with its own identity: otherwise those processes use another file (this one was
    /// removed or replaced under them), and the open is refused.
    ///
    /// - Returns: `alone` when the folder's exclusive lock is held: the caller makes the page's
    ///   mutex again, then lets others in (shared).
    private static func openSharedPage(
        in folder: StoreFolder, name: String
    ) throws(TinyStorageError) -> (fd: Int32, page: UnsafeMutableRawPointer, alone: Bool) {
        let io = folder.io
        let path = folder.path(of: name)
        let presence = folder.directory.fd
        for attempt in 0..<openAttempts {
            if attempt >= 10 {
                usleep(200)
            } else if attempt > 0 {
                sched_yield()
            }
            let alone: Bool
            switch io.lock(presence, .exclusive, waiting: false) {
            case .success: alone = true
            case .failure(.wouldBlock): alone = false
            // NB: no `flock` on folders here: the page is used as it is, as before this lock existed.
            case .failure:
                let (fd, page) = try openUnguardedPage(in: folder, name: name)
                return (fd, page, false)
            }
            guard let (fd, opened) = try openLockFile(in: folder, name: name, creating: alone, exclusive: alone) else {
                continue  // missing while others have the store open: being created, or removed under them
            }
            let (page, status) = opened
            let stamped = identity(in: page) == (status.device, status.inode)
            if alone {
                if !stamped {
                    if identity(in: page).inode != 0 { resetForeignPage(page) }
                    ts_atomic_store_u64(page + identityOffset, status.device)
                    ts_atomic_store_u64(page + identityOffset + 8, status.inode)
                }
                return (fd, page, true)
            }
            if stamped {
                if case .failure = io.lock(presence, .shared) { return (fd, page, false) }  // as without the lock
                // NB: the name may lead to another file by now (removed, or replaced): look again.
                if case .success(let now) = io.status(in: folder.directory, name), now.isSameFile(as: status) {
                    return (fd, page, false)
                }
                _ = io.lock(presence, .unlocked)
            }
            io.unmap(page, length: size)
            io.close(fd)
        }
        throw TinyStorageError(
            .unavailable,
            "The store's lock file '\(path)' was removed or replaced while another process had the store open. "
                + "That process goes on using the file it opened, so this one cannot commit beside it safely. "
                + "The store opens again once every process that had it open has closed it (or quit); do not "
                + "remove or replace store.lock while the store is in use.")
    }

    /// Opens and maps the lock file, creating it when it is missing and `creating` says so.
    ///
    /// - Returns: `nil` when it is missing (and not created).
    private static func openLockFile(
        in folder: StoreFolder, name: String, creating: Bool, exclusive: Bool
    ) throws(TinyStorageError) -> (fd: Int32, (page: UnsafeMutableRawPointer, status: FileStatus))? {
        let io = folder.io
        let release = { if exclusive { _ = io.lock(folder.directory.fd, .unlocked) } }
        let opened: (fd: Int32, status: FileStatus?)?
        do throws(TinyStorageError) {
            opened = try folder.openFileWithStatus(name, writable: true, creation: creating ? .ifMissing : .never)
        } catch {
            release()
            throw error
        }
        guard let (fd, status) = opened else { return nil }
        do throws(Errno) {
            return (fd, try mapPage(fd, status: status, io: io))
        } catch {
            io.close(fd)
            release()
            throw .system(error, "open the lock file", path: folder.path(of: name))
        }
    }

    /// Opens (creating if needed) and maps the lock file without the folder's lock: where `flock`
    /// does not work on folders, the page is used as it is, as before that lock existed.
    private static func openUnguardedPage(
        in folder: StoreFolder, name: String
    ) throws(TinyStorageError) -> (fd: Int32, page: UnsafeMutableRawPointer) {
        let io = folder.io
        guard let (fd, opened) = try folder.openFileWithStatus(name, writable: true, creation: .ifMissing) else {
            throw TinyStorageError(.io, "The lock file '\(folder.path(of: name))' could not be created.")
        }
        do throws(Errno) {
            return (fd, try mapPage(fd, status: opened, io: io).page)
        } catch {
            io.close(fd)
            throw .system(error, "open the lock file", path: folder.path(of: name))
        }
    }

    /// Maps the first page of the lock file open on `fd`, growing the file to a page first.
    private static func mapPage(
        _ fd: Int32, status opened: FileStatus?, io: FileIO
    ) throws(Errno) -> (page: UnsafeMutableRawPointer, status: FileStatus) {
        var status: FileStatus
        if let opened { status = opened } else { status = try io.status(fd).get() }
        if status.size < size {
            // NB: growing the file happens under the lock so two openers cannot race a reader
            // into mapping past the end of a shorter file (SIGBUS).
            try io.lock(fd, exclusive: true).get()
            defer { _ = io.lock(fd, exclusive: false) }
            status = try io.status(fd).get()
            if status.size < size { try io.truncate(fd, to: size).get() }
        }
        return (try io.mapShared(fd, length: size).get(), status)
    }

    /// The file the page says it belongs to; zeros when it says none.
    private static func identity(in page: UnsafeMutableRawPointer) -> (device: UInt64, inode: UInt64) {
        (ts_atomic_load_u64(page + identityOffset), ts_atomic_load_u64(page + identityOffset + 8))
    }

    /// Forgets what a page copied from another file says: nothing is published (the data file is
    /// checked from its start), its mutex is made again before use, no file name is durable.
    /// Call holding the folder's exclusive lock, where no process has the page mapped for use.
    private static func resetForeignPage(_ page: UnsafeMutableRawPointer) {
        ts_atomic_store_u64(page, 0)
        ts_atomic_store_u64(page + 72, 0)
        ts_atomic_store_u64(page + SharedMutexCommitLock.stampOffset, 0)
        ts_atomic_store_u64(page + nameSyncedOffset, 0)
        ts_atomic_store_u64(page + cutsOffset, 0)
        ts_atomic_store_u64(page + cutsFlushedOffset, 0)
    }

    deinit {
        io.unmap(page, length: Self.size)
        io.close(fd)
        // NB: the folder's descriptor is closed with `presence`, which lets go of its lock.
    }

    /// Lets go of the folder's shared lock: this process no longer has the store open (its
    /// engine is gone), though the page may stay mapped a moment for a last flush.
    func leaveStore() {
        _ = io.lock(presence.directory.fd, .unlocked)
    }

    /// Takes the exclusive cross-process commit lock, waiting for other processes' commits to finish.
    ///
    /// When its previous holder died holding it (Linux's robust mutex says so), that holder may
    /// have been anywhere in a commit, a compaction's swap or a repair: the page is marked as not
    /// published and every process is told to look, so the data file is checked from its start
    /// (an interrupted append is cut off as a torn tail) before anything else is appended. Only
    /// then is the lock marked consistent.
    ///
    /// - Parameter excludingOlderVersions: Also take `flock` on this file, as versions of this
    ///   library from before the mutex do for every commit, when it is the mutex: for everything
    ///   but appending to a file in the current format (a file of an older format may be shared
    ///   with such a process, which only ever appends to one of those). Pass the same to ``unlock(excludingOlderVersions:)``.
    /// - Returns: `true` when the previous holder died holding the lock.
    @discardableResult
    func lock(excludingOlderVersions: Bool = true) throws(Errno) -> Bool {
        // NB: a read-only store never commits; this keeps any path that would from writing the page.
        if isReadOnly { throw .readOnlyFileSystem }
        let ownerDied: Bool
        switch sharedMutex?.lock() ?? fileLock.lock() {
        case .success(.acquired):
            ownerDied = false
        case .success(.ownerDied):
            markNotPublished()
            ts_atomic_fetch_add_u64(page + 24, 1)  // every process looks again
            sharedMutex?.markConsistent()
            ownerDied = true
        case .failure(let error):
            throw error
        }
        if excludingOlderVersions, let sharedMutex {
            // NB: after the mutex, always: every process of this version takes them in that order.
            if case .failure(let error) = io.lock(fd, exclusive: true) {
                sharedMutex.unlock()
                throw error
            }
        }
        return ownerDied
    }

    /// Whether a process that dies holding the commit lock is reported to the next holder (the
    /// Linux mutex): then nothing past a data file's committed length is taken for the remains of
    /// a dead writer unless the lock says one died, and commits may append through a mapping of
    /// space allocated ahead (on the file systems ``AppendMapping`` trusts).
    var reportsDeadHolders: Bool { sharedMutex != nil }

    /// Releases the cross-process commit lock (and `flock`, when it was taken with it).
    func unlock(excludingOlderVersions: Bool = true) {
        guard sharedMutex != nil else { return fileLock.unlock() }
        if excludingOlderVersions { _ = io.lock(fd, exclusive: false) }
        // NB: not bound with `if let`, which retained and released it.
        sharedMutex?.unlock()
    }
}
