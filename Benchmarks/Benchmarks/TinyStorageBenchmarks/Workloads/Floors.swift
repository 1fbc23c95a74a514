import Benchmark
import CBenchmarkSupport
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The floors of issue 12: what the pieces of a commit cost by themselves on this machine, each
/// per operation, 1,000 operations per iteration, so every workload can be read as a multiple of
/// them in the same run. The lock-guarded dictionary read is `b read …: locked dictionary
/// (baseline)` (Reads.swift).
func registerFloorBenchmarks() {
    // NB: two pwrite floors, because the kernel makes them differ: appending to a growing file
    // (a `.standard` commit today) and writing into space reserved with `posix_fallocate` (what
    // a mapping would use). Space filled with zeros in one large write, as a `.immediate` commit
    // preallocates, costs several times more per small write on this machine's ext4 (large
    // folios: each write walks the whole folio's buffers); `e … preallocated pwrite` uses that.
    for (label, space) in [
        ("appending", RawAppendFile.Space.growing), ("preallocated file", .allocated(bytes: 1 << 20)),
    ] {
        register(
            "floor: pwrite 40 B, \(label)", .perOperation(), setUp: { try PwriteFile(label: label, space: space) },
            tearDown: { $0.directory.remove() }
        ) { benchmark, state in
            for _ in benchmark.scaledIterations { state.file.append() }
        }
    }

    register("floor: flock LOCK_EX + LOCK_UN", .perOperation(), setUp: LockFile.init, tearDown: { $0.dispose() }) {
        benchmark, state in
        for _ in benchmark.scaledIterations {
            precondition(flock(state.fd, LOCK_EX) == 0, "flock(LOCK_EX) failed: \(errno)")
            precondition(flock(state.fd, LOCK_UN) == 0, "flock(LOCK_UN) failed: \(errno)")
        }
    }

    // NB: the read baseline's lock beside the store's: part of a cached read's distance to the
    // locked dictionary is the difference between the two locks.
    register("floor: pthread mutex lock + unlock (the read baseline's lock)", .perOperation(), setUp: LocalMutex.init) {
        benchmark, state in
        for _ in benchmark.scaledIterations {
            pthread_mutex_lock(state.mutex)
            pthread_mutex_unlock(state.mutex)
        }
    }
    register(
        "floor: word lock + unlock (the store's in-process lock on Linux)", .perOperation(), setUp: LocalMutex.init
    ) {
        benchmark, state in
        for _ in benchmark.scaledIterations {
            bench_word_lock(state.word)
            blackHole(bench_word_unlock(state.word))
        }
    }

    register("floor: CRC-32C of 40 B", .perOperation(), setUp: ChecksumInput.init) { benchmark, input in
        var crc: UInt32 = 0
        for _ in benchmark.scaledIterations {
            crc = input.bytes.withUnsafeBytes { bench_crc32c(crc, $0.baseAddress, $0.count) }
        }
        blackHole(crc)
    }

    #if os(Linux)
    register(
        "floor: memcpy 40 B into a MAP_SHARED file mapping", .perOperation(),
        setUp: { try MappedFile(label: "memcpy", size: 1 << 20) }, tearDown: { $0.dispose() }
    ) { benchmark, state in
        for _ in benchmark.scaledIterations { state.append(state.record) }
    }

    register(
        "floor: robust process-shared mutex lock + unlock", .perOperation(),
        setUp: { try SharedMutex(label: "mutex") }, tearDown: { $0.dispose() }
    ) { benchmark, state in
        for _ in benchmark.scaledIterations {
            precondition(pthread_mutex_lock(state.mutex) == 0, "pthread_mutex_lock failed")
            precondition(pthread_mutex_unlock(state.mutex) == 0, "pthread_mutex_unlock failed")
        }
    }
    #endif
}

/// An in-process `pthread_mutex_t` and a lock word, for the in-process lock floors.
final class LocalMutex {
    let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    let word = UnsafeMutablePointer<UInt32>.allocate(capacity: 1)
    init() {
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        word.initialize(to: 0)
    }
    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        word.deallocate()
    }
}

/// A file that `pwrite` walks through in 40-byte steps (see ``RawAppendFile``).
final class PwriteFile {
    let directory: ScratchDirectory
    let file: RawAppendFile
    init(label: String, space: RawAppendFile.Space) throws {
        directory = ScratchDirectory("floor-pwrite-\(label.prefix(4))")
        file = try RawAppendFile(path: directory.path("floor.log"), space: space)
    }
}

/// An open lock file, as the store keeps one.
final class LockFile {
    let directory = ScratchDirectory("floor-flock")
    let fd: Int32
    init() throws {
        fd = open(directory.path("store.lock"), O_RDWR | O_CREAT, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }
    func dispose() {
        close(fd)
        directory.remove()
    }
}

/// 40 bytes to checksum; checks first that the fast CRC-32C agrees with the table and with the
/// standard check value, so the floor measures a correct checksum.
struct ChecksumInput {
    let bytes = RawAppendFile.record
    init() throws {
        let check = Array("123456789".utf8)
        let fast = check.withUnsafeBytes { bench_crc32c(0, $0.baseAddress, $0.count) }
        let slow = check.withUnsafeBytes { bench_crc32c_table(0, $0.baseAddress, $0.count) }
        guard fast == 0xE306_9283, slow == 0xE306_9283 else {
            throw FloorFailed(message: "CRC-32C check value: \(fast), table \(slow), expected 0xE3069283")
        }
        if bench_crc32c_is_hardware() == 0 { print("note: CRC-32C floor uses the table (no CRC instruction)") }
    }
}

struct FloorFailed: Error { var message: String }

#if os(Linux)
/// A file whose space `posix_fallocate(3)` really allocated (so a store into the mapping can
/// never hit a hole on a full disk and raise `SIGBUS`), mapped `MAP_SHARED`.
final class MappedFile {
    let directory: ScratchDirectory
    let fd: Int32
    let size: Int
    let base: UnsafeMutableRawPointer
    let record = RawAppendFile.record
    private var end = 0

    init(label: String, size: Int) throws {
        directory = ScratchDirectory("floor-\(label)")
        self.size = size
        fd = open(directory.path("mapped"), O_RDWR | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        let allocated = posix_fallocate(fd, 0, off_t(size))
        guard allocated == 0 else { throw POSIXError(POSIXErrorCode(rawValue: allocated) ?? .EIO) }
        guard let mapping = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), mapping != MAP_FAILED
        else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        base = mapping
    }

    /// Writes a zero into every page, so that later stores find each page mapped and writable
    /// and take no page fault (call it before timing).
    func faultIn() {
        let page = sysconf(Int32(_SC_PAGESIZE))
        for offset in stride(from: 0, to: size, by: page) {
            base.storeBytes(of: 0, toByteOffset: offset, as: UInt8.self)
        }
    }

    /// Copies `bytes` after the previous copy (`memcpy`), from offset 0 again at the end.
    @inline(__always)
    func append(_ bytes: [UInt8]) {
        if end + bytes.count > size { end = 0 }
        bytes.withUnsafeBytes { (base + end).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        end += bytes.count
    }

    func dispose() {
        munmap(base, size)
        close(fd)
        directory.remove()
    }
}

/// A robust, process-shared mutex at the start of a `MAP_SHARED` mapping of a one-page file,
/// where a lock shared by every process that opens a store would live.
final class SharedMutex {
    let file: MappedFile
    var mutex: UnsafeMutablePointer<pthread_mutex_t> { file.base.assumingMemoryBound(to: pthread_mutex_t.self) }

    init(label: String) throws {
        file = try MappedFile(label: label, size: 4096)
        precondition(bench_mutex_size() == MemoryLayout<pthread_mutex_t>.size)
        let result = bench_robust_mutex_init(file.base)
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EINVAL) }
    }

    func dispose() {
        pthread_mutex_destroy(mutex)
        file.dispose()
    }
}
#endif
