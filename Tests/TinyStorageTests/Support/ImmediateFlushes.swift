import Dispatch

@testable import TinyStorage

/// Background flushes run at once on another thread; `finish()` waits for them all.
final class ImmediateFlushes: Sendable {
    private let group = DispatchGroup()

    var scheduler: BackgroundScheduler {
        BackgroundScheduler { [group] flush in
            group.enter()
            DispatchQueue.global().async {
                flush()
                group.leave()
            }
        }
    }

    func finish() { group.wait() }
}
