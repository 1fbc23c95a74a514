import Foundation
import Testing

@testable import TinyStorage

// Support for the issue 3 in-process tests: notifications, Observation, value streams.

/// One `didChangeNotification`: the changed keys (sorted) and the writer's writeID.
struct Announcement: Equatable, Hashable, Sendable, CustomStringConvertible {
    var keys: [String]
    var writeID: String?

    init(_ keys: [String], _ writeID: String? = nil) {
        self.keys = keys.sorted()
        self.writeID = writeID
    }

    var description: String { "\(keys) \(writeID?.prefix(8) ?? "none")" }
}

/// Elements arriving on other threads, which a test can wait for (the timeout only guards a hang).
final class Arrivals<Element: Sendable>: @unchecked Sendable {
    // @unchecked: `elements` is only touched while holding `condition`.
    private let condition = NSCondition()
    private var elements: [Element] = []

    func append(_ element: Element) {
        condition.lock()
        defer { condition.unlock() }
        elements.append(element)
        condition.broadcast()
    }

    var all: [Element] {
        condition.lock()
        defer { condition.unlock() }
        return elements
    }

    /// Waits until at least `count` elements arrived or `seconds` passed; returns what arrived.
    func wait(forCount count: Int, seconds: Double = 60) -> [Element] {
        let deadline = Date(timeIntervalSinceNow: seconds)
        condition.lock()
        defer { condition.unlock() }
        while elements.count < count, condition.wait(until: deadline) {}
        return elements
    }

    /// Waits until what arrived satisfies `isComplete` or `seconds` passed; returns what arrived.
    func wait(until isComplete: ([Element]) -> Bool, seconds: Double = 60) -> [Element] {
        let deadline = Date(timeIntervalSinceNow: seconds)
        condition.lock()
        defer { condition.unlock() }
        while !isComplete(elements), condition.wait(until: deadline) {}
        return elements
    }
}

/// Records the notifications `storage` posts, from creation until release.
final class AnnouncementLog: @unchecked Sendable {
    // @unchecked: `observer` is set once in `init` and only handed back to `removeObserver`.
    let received = Arrivals<Announcement>()
    /// Notifications whose `object` was not the store, or whose keys were missing.
    let malformed = Arrivals<String>()
    private let storage: TinyStorage
    private var observer: (any NSObjectProtocol)?

    /// Starts recording once the announcements of earlier commits have been delivered.
    init(_ storage: TinyStorage) {
        self.storage = storage
        storage.engine.delivery.waitUntilDelivered()
        let received = self.received
        let malformed = self.malformed
        observer = NotificationCenter.default.addObserver(
            forName: TinyStorage.didChangeNotification, object: storage, queue: nil
        ) { [storage] notification in
            guard notification.object as? TinyStorage === storage,
                let keys = notification.userInfo?[TinyStorage.changedKeysUserInfoKey] as? [String]
            else { return malformed.append("\(notification)") }
            received.append(Announcement(keys, notification.userInfo?[TinyStorage.writeIDUserInfoKey] as? String))
        }
    }

    deinit {
        if let observer { NotificationCenter.default.removeObserver(observer) }
    }

    /// Every announcement so far, after those of every commit this process made are delivered.
    var delivered: [Announcement] {
        storage.engine.delivery.waitUntilDelivered()
        return received.all
    }
}

/// The first `count` elements of `stream`, or fewer when it ends or `seconds` pass first (a hang guard).
func collect<Element: Sendable>(_ stream: AsyncStream<Element>, count: Int, seconds: Double = 60) async -> [Element] {
    await collect(stream, seconds: seconds) { _, collected in collected == count }
}

/// The elements of `stream` up to the first for which `isLast` is true, or fewer when it ends or
/// `seconds` pass first (a hang guard).
func collect<Element: Sendable>(
    _ stream: AsyncStream<Element>, seconds: Double = 60, until isLast: @escaping @Sendable (Element) -> Bool
) async -> [Element] {
    await collect(stream, seconds: seconds) { element, _ in isLast(element) }
}

/// Collects until `isLast(element, number of elements collected so far)` is true.
private func collect<Element: Sendable>(
    _ stream: AsyncStream<Element>, seconds: Double, isLast: @escaping @Sendable (Element, Int) -> Bool
) async -> [Element] {
    let arrivals = Arrivals<Element>()
    await withTaskGroup(of: Void.self) { group in
        group.addTask {
            var collected = 0
            for await element in stream {
                arrivals.append(element)
                collected += 1
                if isLast(element, collected) { return }
            }
        }
        group.addTask { try? await Task.sleep(for: .seconds(seconds)) }
        await group.next()
        group.cancelAll()
    }
    return arrivals.all
}

/// Runs `body` on its own thread and reports whether it finished within `seconds`: a deadlock
/// fails the test instead of hanging the run.
func finishes(within seconds: Double = 60, _ body: @escaping @Sendable () -> Void) -> Bool {
    let done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        body()
        done.signal()
    }
    return done.wait(timeout: .now() + seconds) == .success
}

/// Like `withTemporaryDirectory`, for async tests.
func withScratchDirectory<R>(_ body: (URL) async throws -> R) async throws -> R {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("TinyStorageTests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}
