import CTinyStorageShims

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The lock file beside a store's data file: the target of the cross-process `flock(2)` and a
/// page of counters shared by every process through `mmap(2)`.
///
/// ```text
/// offset 0  magic      "TSLOCK" 0x00 0x01 once initialized
/// offset 8  generation of the data file (bumped by compaction)
/// offset 16 length     the data file's committed length
/// offset 24 sequence   bumped after every commit, compaction or repair
/// ```
///
/// Writers change the page only while holding the lock. Readers load `sequence` without any
/// system call: when it equals the value they last saw, no other process has committed since, so
/// a cached read is current. The file is the truth; the page only says where to look.
final class CoordinationFile: @unchecked Sendable {
    // @unchecked: `page` is shared memory accessed only through atomic loads and stores, and
    // the fields other than `sequence` are written only while holding the flock.
    static let size = 4096
    private static let magic: UInt64 = 0x0100_4B43_4F4C_5354  // "TSLOCK\0\u{1}" little-endian

    let path: String
    private let fd: Int32
    private let page: UnsafeMutableRawPointer
    private let io: FileIO

    /// Opens (creating if needed, mode 0600) and maps the lock file `name` in `folder`.
    ///
    /// - Throws: `.unsafeFile` when something else than the store's own file is there, or the
    ///   system error.
    init(in folder: StoreFolder, name: String) throws(TinyStorageError) {
        let path = folder.path(of: name)
        self.path = path
        self.io = folder.io
        let io = folder.io
        guard let fd = try folder.openFile(name, writable: true, creation: .ifMissing) else {
            throw TinyStorageError(.io, "The lock file '\(path)' could not be created.")
        }
        do throws(Errno) {
            let status = try io.status(fd).get()
            if status.size < Self.size {
                // NB: growing the file happens under the lock so two openers cannot race a reader
                // into mapping past the end of a shorter file (SIGBUS).
                try io.lock(fd, exclusive: true).get()
                defer { _ = io.lock(fd, exclusive: false) }
                if try io.status(fd).get().size < Self.size {
                    try io.truncate(fd, to: Self.size).get()
                }
            }
            self.page = try io.mapShared(fd, length: Self.size).get()
            self.fd = fd
        } catch {
            io.close(fd)
            throw .system(error, "open the lock file", path: path)
        }
    }

    deinit {
        io.unmap(page, length: Self.size)
        io.close(fd)
    }

    /// Takes the exclusive cross-process lock, waiting for other processes' commits to finish.
    func lock() throws(Errno) { try io.lock(fd, exclusive: true).get() }

    /// Releases the cross-process lock.
    func unlock() { _ = io.lock(fd, exclusive: false) }

    /// Bumped by every commit in any process. Lock-free; no system call.
    var sequence: UInt64 { ts_atomic_load_u64(page + 24) }

    /// Whether any process has published a state yet. Read under the lock.
    var isInitialized: Bool { ts_atomic_load_u64(page) == Self.magic }

    /// The data file's generation and committed length, as last published. Read under the lock.
    var published: (generation: UInt64, length: Int) {
        (ts_atomic_load_u64(page + 8), Int(ts_atomic_load_u64(page + 16)))
    }

    /// The generation and length as one consistent pair, read without the lock; `nil` when a
    /// compaction changed them while reading. Writers store the generation before the length, so a
    /// length read between two equal generations belongs to that generation.
    var consistentPublished: (generation: UInt64, length: Int)? {
        let before = ts_atomic_load_u64(page + 8)
        let length = Int(ts_atomic_load_u64(page + 16))
        let after = ts_atomic_load_u64(page + 8)
        return before == after ? (before, length) : nil
    }

    /// Announces a new committed state to every process. Call under the lock.
    /// - Returns: the new sequence number.
    @discardableResult
    func publish(generation: UInt64, length: Int) -> UInt64 {
        ts_atomic_store_u64(page, Self.magic)
        ts_atomic_store_u64(page + 8, generation)
        ts_atomic_store_u64(page + 16, UInt64(length))
        return ts_atomic_fetch_add_u64(page + 24, 1) + 1
    }
}
