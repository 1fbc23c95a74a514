import Foundation
import TinyStorage

/// A value tests write from inside a scope and read after it, under a lock.
final class Box<Value: Sendable>: @unchecked Sendable {
    // @unchecked: `stored` is only touched while holding `lock`.
    private let lock = NSLock()
    private var stored: [Value] = []

    func append(_ value: Value) { lock.withLock { stored.append(value) } }
    var all: [Value] { lock.withLock { stored } }
}

/// Lets `count` tasks wait for one another: each ``arrive()`` returns once all have arrived.
actor Rendezvous {
    private let count: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(count: Int) { self.count = count }

    func arrive() async {
        await withCheckedContinuation { continuation in
            waiting.append(continuation)
            if waiting.count == count {
                for waiter in waiting { waiter.resume() }
                waiting.removeAll()
            }
        }
    }
}

/// The entries of the temporary directory whose name contains `text`.
func temporaryEntries(containing text: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: FileManager.default.temporaryDirectory.path)
        .filter { $0.contains(text) }
}

struct Boom: Error {}

/// Keeps the log of a store a test makes unavailable on purpose out of the test output.
struct SilentLogger: TinyStorageLogging {
    func log(_ level: TinyStorageLogLevel, _ message: String, file: String, function: String, line: Int) {}
}
