import Foundation
import Testing
import TinyStorage

// Shared by the compatibility suite (issue 9): code written for the original TinyStorage 2.x,
// compiled against this library with a plain `import TinyStorage`, as an app's code is.

/// A value type as 2.x apps store them.
struct CompatProfile: Codable, Equatable, Sendable {
    var name: String
    var joined: Date
    var tags: [String]
}

/// A key enum as 2.x apps declare them.
enum CompatKey: String, TinyStorageKey {
    case streak, profile, onboarded
}

/// A logger written for 2.x: a class with mutable state, not `Sendable`.
final class CompatLogger: TinyStorageLogging {
    private let lock = NSLock()
    private var lines: [(level: TinyStorageLogLevel, message: String, file: String, function: String, line: Int)] = []

    func log(_ level: TinyStorageLogLevel, _ message: String, file: String, function: String, line: Int) {
        lock.withLock { lines.append((level, message, file, function, line)) }
    }

    var messages: [String] { lock.withLock { lines.map(\.message) } }
    var sites: [(file: String, function: String, line: Int)] {
        lock.withLock { lines.map { ($0.file, $0.function, $0.line) } }
    }
}

/// A fresh store in a temporary directory, as 2.x apps open one, with the directory removed after `body`.
func withCompatStore<R>(
    logger: any TinyStorageLogging = CompatLogger(), isolation: isolated (any Actor)? = #isolation,
    _ body: (TinyStorage, URL) async throws -> R
) async throws -> R {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("TinyStorageCompat-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let storage = TinyStorage(insideDirectory: directory, name: "unit", logger: logger)
    return try await body(storage, directory)
}

/// Every `didChangeNotification` of one store, as (keys, writeID, posted on the main queue).
final class CompatNotifications: @unchecked Sendable {
    // @unchecked: `received` is only touched under `condition`; `token` is set once in init.
    struct Received: Equatable {
        var keys: [String]
        var writeID: String?
        /// The value of the `marker` given to `init` on the queue the notification was posted on.
        var queueMark: Int? = nil
    }

    private let condition = NSCondition()
    private var received: [Received] = []
    private var token: (any NSObjectProtocol)?

    init(_ storage: TinyStorage, queue: OperationQueue? = nil, marker: DispatchSpecificKey<Int>? = nil) {
        token = NotificationCenter.default.addObserver(
            forName: TinyStorage.didChangeNotification, object: storage, queue: queue
        ) { [weak self] notification in
            let keys = (notification.userInfo?[TinyStorage.changedKeysUserInfoKey] as? [String] ?? []).sorted()
            let writeID = notification.userInfo?[TinyStorage.writeIDUserInfoKey] as? String
            let mark = marker.flatMap { DispatchQueue.getSpecific(key: $0) }
            self?.append(Received(keys: keys, writeID: writeID, queueMark: mark))
        }
    }

    deinit {
        if let token { NotificationCenter.default.removeObserver(token) }
    }

    private func append(_ element: Received) {
        condition.withLock {
            received.append(element)
            condition.broadcast()
        }
    }

    /// What arrived, once `count` notifications have (or after 30 s: a hang guard, not a timing check).
    func wait(forCount count: Int) -> [Received] {
        condition.withLock {
            let deadline = Date().addingTimeInterval(30)
            while received.count < count, condition.wait(until: deadline) {}
            return received
        }
    }

    var all: [Received] { condition.withLock { received } }
}

/// Writes `values` as the original library's `tiny-storage.plist` in `directory/name/`.
func writeOriginalPlist(_ values: [String: Data], in directory: URL, name: String = "unit") throws {
    let folder = directory.appendingPathComponent(name, isDirectory: true)
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    let bytes = try PropertyListSerialization.data(fromPropertyList: values, format: .binary, options: 0)
    try bytes.write(to: folder.appendingPathComponent("tiny-storage.plist"))
}
