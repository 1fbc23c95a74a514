import Foundation
import Testing

@testable import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs `body` with a fresh, empty directory that is deleted afterwards. One per test, so tests
/// and suites can run in parallel without seeing each other's files.
func withTemporaryDirectory<R>(_ body: (URL) throws -> R) throws -> R {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("TinyStorageTests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try body(directory)
}

/// Collects log messages so tests can assert what was reported, and keeps test output quiet.
final class TestLogger: TinyStorageLogging {
    let messages = Locked<[(level: TinyStorageLogLevel, text: String)]>([])

    func log(_ level: TinyStorageLogLevel, _ message: String, file: String, function: String, line: Int) {
        messages.withLock { $0.append((level, message)) }
    }

    /// Every message at `level` or above.
    func texts(atLeast level: TinyStorageLogLevel) -> [String] {
        messages.withLock { $0.filter { $0.level >= level }.map(\.text) }
    }
}

/// Asserts that the first throwing read of `storage` reports the data loss its repair found
/// (issue 11: damage below the durable mark), and that the next one reads normally.
func expectDataLossReportedOnce(by storage: TinyStorage, sourceLocation: SourceLocation = #_sourceLocation) {
    let error = expectError(.corrupted, sourceLocation: sourceLocation) { try storage.rawJSON() }
    #expect(
        error?.message.contains("known to be on stable storage") == true, "\(String(describing: error))",
        sourceLocation: sourceLocation)
    #expect(storage.recoveryReports.first?.isDataLoss == true, sourceLocation: sourceLocation)
    #expect(throws: Never.self, sourceLocation: sourceLocation) { try storage.rawJSON() }
}

extension TinyStorage {
    /// Every key and its stored bytes (JSON, or a `Data` value's raw bytes), without kinds.
    func rawJSON() throws(TinyStorageError) -> [String: Data] {
        try rawEntries().mapValues(\.bytes)
    }

    /// The bytes stored for `key`, without their kind, or `nil` when absent.
    func rawJSON(forKey key: String) throws(TinyStorageError) -> Data? {
        try rawValue(forKey: key)?.bytes
    }

    /// Stores already-encoded JSON for each key in one atomic commit.
    func storeRawJSON(_ items: [String: Data], writeID: String? = nil) throws(TinyStorageError) {
        try storeRaw(items.mapValues { StoredValue($0, kind: .json) }, writeID: writeID)
    }
}

/// Opens the store `name` inside `directory` with a quiet logger. Changes are announced on the
/// main queue, the default, unless `notificationQueue` names another.
func openStore(
    _ directory: URL, name: String = "store", durability: TinyStorage.Durability = .standard,
    io: FileIO = .system, notificationQueue: DispatchQueue = .main, logger: TestLogger = TestLogger(),
    options: Engine.Options = Engine.Options()
) -> TinyStorage {
    TinyStorage(
        insideDirectory: directory, name: name, durability: durability, io: io, notificationQueue: notificationQueue,
        logger: logger, options: options)
}

/// Commits `"\(value)\(index)"` under `"key\(index)"` for each index below `count`, one commit each.
func storeNumbered(_ value: String, count: Int, in storage: TinyStorage) throws {
    for index in 0..<count { try storage.storeOrThrow("\(value)\(index)", forKey: "key\(index)") }
}

/// Expects a new instance of the store in `directory` to read what ``storeNumbered(_:count:in:)``
/// committed at each of `indices`, and returns it.
@discardableResult
func expectNumbered(
    _ value: String, at indices: [Int], in directory: URL, sourceLocation: SourceLocation = #_sourceLocation
) -> TinyStorage {
    let reopened = openStore(directory)
    for index in indices {
        #expect(
            reopened.retrieve(type: String.self, forKey: "key\(index)") == "\(value)\(index)",
            sourceLocation: sourceLocation)
    }
    return reopened
}

/// The size of the file at `url` in bytes.
func fileSize(_ url: URL) throws -> Int {
    var info = stat()
    guard stat(url.path, &info) == 0 else { throw Errno.current }
    return Int(info.st_size)
}

/// Where the log in the data file at `url` ends (see `LogFormat.framesEnd(of:)`): on Linux a data
/// file goes on past its log, with space allocated ahead.
func committedLength(_ url: URL) throws -> Int {
    LogFormat.framesEnd(of: [UInt8](try Data(contentsOf: url)))
}

/// The permission bits (`mode & 0o777`) of the file or directory at `url`.
func permissions(_ url: URL) throws -> Int {
    var info = stat()
    guard stat(url.path, &info) == 0 else { throw Errno.current }
    return Int(info.st_mode & 0o777)
}

/// Cuts the file at `url` to `length` bytes (`truncate(2)`).
func truncateFile(_ url: URL, to length: Int) throws {
    guard truncate(url.path, off_t(length)) == 0 else { throw Errno.current }
}

/// The generation in the data file's header (bumped by every compaction).
func headerGeneration(_ url: URL) throws -> UInt64 {
    let bytes = try Data(contentsOf: url)
    let header = try bytes.withUnsafeBytes { raw in try LogHeader.decode(raw).get() }
    return header.generation
}

/// Copies the directory at `source` to a new, unique place inside `parent` and returns it.
func copyDirectory(_ source: URL, into parent: URL) throws -> URL {
    let destination = parent.appendingPathComponent(UUID().uuidString, isDirectory: true)
    try FileManager.default.copyItem(at: source, to: destination)
    return destination
}

/// The files inside the store's quarantine directory, or none when it does not exist.
func quarantineFiles(of storage: TinyStorage) -> [URL] {
    let directory = storage.directoryURL.appendingPathComponent("quarantine", isDirectory: true)
    let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
    return names.sorted().map { directory.appendingPathComponent($0) }
}

/// Every path below `directory`, relative to it, sorted.
func allPaths(below directory: URL) -> [String] {
    let enumerator = FileManager.default.enumerator(atPath: directory.path)
    var paths: [String] = []
    while let path = enumerator?.nextObject() as? String { paths.append(path) }
    return paths.sorted()
}

/// A small, fast, seedable random number generator (SplitMix64), so random tests can print their
/// seed and be replayed exactly.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A seed from `TINYSTORAGE_TEST_SEED` when set (to replay a failure), else a random one.
    static func makeSeed() -> UInt64 {
        if let text = ProcessInfo.processInfo.environment["TINYSTORAGE_TEST_SEED"], let seed = UInt64(text) {
            return seed
        }
        return UInt64.random(in: 0...UInt64.max)
    }
}

extension Data {
    /// `count` random bytes from `generator`.
    static func random<G: RandomNumberGenerator>(count: Int, using generator: inout G) -> Data {
        Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }
}

/// Expects `body` to throw a ``TinyStorageError`` with `code`, and returns it.
@discardableResult
func expectError<R>(
    _ code: TinyStorageError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R
) -> TinyStorageError? {
    do {
        _ = try body()
        Issue.record("Expected TinyStorageError.\(code), but nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as TinyStorageError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("Expected TinyStorageError.\(code), got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// The `TinyStorageError` an unavailable store reports, or `nil` when it is available.
func unavailabilityError(_ storage: TinyStorage) -> TinyStorageError? {
    if case .unavailable(let error) = storage.availability { return error }
    return nil
}

/// Whether this build takes Linux's decisions (see `Platform`), for tests of Linux-only
/// mechanisms (the mutex in the lock page, appends through a mapping, the futex signal): false on
/// Apple platforms, and on Linux built with `TINYSTORAGE_APPLE_SEMANTICS`, where the pass of the
/// suite without it runs them.
let isLinux = Platform.current.commitLock == .sharedMutex

/// Holds `queue` (a serial queue) from another block until the returned release is called: work
/// queued on it meanwhile waits. Returns once the holding block runs.
func hold(_ queue: DispatchQueue) -> @Sendable () -> Void {
    let running = DispatchSemaphore(value: 0)
    let held = DispatchSemaphore(value: 0)
    queue.async {
        running.signal()
        held.wait()
    }
    running.wait()
    return { held.signal() }
}
