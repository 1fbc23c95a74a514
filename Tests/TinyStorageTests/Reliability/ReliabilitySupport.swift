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

/// Every file and directory below a directory, with its bytes (`nil` for directories), so a test
/// can assert that an operation left a store's folder exactly as it was: no byte changed, no file
/// added, renamed or removed.
///
/// NB: a lock file (`store.lock`) is listed by name only: its page is memory shared between
/// processes, which flushes update in the background, not data. For the same reason the data
/// file's durable mark (header bytes 40..<64 of a version 2 file), which each flush advances in
/// place, is compared as zeros.
func snapshot(of directory: URL) throws -> [String: Data?] {
    var result: [String: Data?] = [:]
    for path in allPaths(below: directory) {
        let url = directory.appendingPathComponent(path)
        var isDirectory: ObjCBool = false
        _ = FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory)
        let isLockFile = url.lastPathComponent == "store.lock"
        var contents = isDirectory.boolValue || isLockFile ? nil : try Data(contentsOf: url)
        if url.lastPathComponent == "store.tinystorage", var bytes = contents, bytes.count >= 64, bytes[8] >= 2 {
            bytes.replaceSubrange(40..<64, with: Data(count: 24))  // the durable mark, advanced by flushes
            contents = bytes
        }
        result[path] = isDirectory.boolValue ? nil : isLockFile ? Data("lock file".utf8) : contents
    }
    return result
}

/// Creates the store `name` in `directory` holding `values`, one commit each, and closes it.
/// - Returns: the data file's URL.
@discardableResult
func makeStore(
    in directory: URL, name: String = "store", values: [(String, any Encodable & Sendable)],
    options: Engine.Options = Engine.Options()
) throws -> URL {
    let storage = openStore(directory, name: name, options: options)
    for (key, value) in values { try storage.storeOrThrow(value, forKey: key) }
    // NB: flushed, with its durable mark, as any store is a second after its last commit: damage
    // to it is then data loss, where damage to commits not yet flushed is the power-loss window.
    try storage.synchronize()
    return storage.fileURL
}

/// The values most reliability tests start from: the streak and a few neighbours.
var streakValues: [(String, any Encodable & Sendable)] {
    [("streak", 364), ("name", "Ada"), ("onboarded", true), ("scores", [1.5, 2.5])]
}

/// A fault rule that fails `call` on paths ending in `suffix` (every path when `nil`).
func failing(
    _ call: FileIO.Call, _ error: Errno, pathEndingIn suffix: String? = nil
) -> @Sendable (FileIO.Call, String?) -> FileIO.Fault? {
    { candidate, path in
        guard candidate == call else { return nil }
        if let suffix { guard let path, path.hasSuffix(suffix) else { return nil } }
        return .fail(error)
    }
}

/// A clock whose time moves only when someone sleeps on it: sleeping until an instant jumps there
/// at once. Lets `waitUntilAvailable` time out deterministically, without waiting.
///
/// With `parksSleepers`, a sleep instead announces itself on ``sleepers`` and then waits until
/// its task is cancelled, so a test can cancel a waiter it knows to be sleeping.
struct VirtualClock: Clock {
    struct Instant: InstantProtocol {
        var offset: Swift.Duration

        func advanced(by duration: Swift.Duration) -> Self { Instant(offset: offset + duration) }
        func duration(to other: Self) -> Swift.Duration { other.offset - offset }
        static func < (lhs: Self, rhs: Self) -> Bool { lhs.offset < rhs.offset }
    }

    private let state = Locked<(now: Swift.Duration, sleeps: Int)>((.zero, 0))
    let parksSleepers: Bool
    /// One element each time a parked sleep starts.
    let sleepers: AsyncStream<Void>
    private let announce: AsyncStream<Void>.Continuation

    init(parksSleepers: Bool = false) {
        self.parksSleepers = parksSleepers
        (sleepers, announce) = AsyncStream<Void>.makeStream()
    }

    var now: Instant { Instant(offset: state.withLock { $0.now }) }
    var minimumResolution: Swift.Duration { .nanoseconds(1) }
    /// How many times anyone slept on this clock.
    var sleeps: Int { state.withLock { $0.sleeps } }

    func sleep(until deadline: Instant, tolerance: Swift.Duration?) async throws {
        try Task.checkCancellation()
        state.withLock { $0.sleeps += 1 }
        if parksSleepers {
            announce.yield()
            // Returns only by throwing `CancellationError`.
            while true { try await Task.sleep(for: .seconds(3_600)) }
        }
        state.withLock { $0.now = max($0.now, deadline.offset) }
    }
}
