#if os(Linux) || os(Android)
import CTinyStorageShims
import Dispatch
import Glibc

/// Linux: reports inotify events on a store's folder (see ``ChangeEventSource``).
///
/// Sees names created, renamed and removed (compactions, repairs, restored files), attributes
/// changed (a file made readable again), and the folder itself going away. Not writes to the
/// files: every commit is one, and watching them would make the kernel queue an event, and wake
/// this process's reader, for each of this process's own commits. Commits are reported by the
/// change signal in the shared page (``SignalEventSource``), which every writer bumps after it
/// publishes. Every source in a process shares one inotify instance (the per-user limit
/// on instances is small), read by one Dispatch source.
final class InotifyEventSource: LosableSource {
    private let directoryPath: String
    private let registration = Locked<(wd: Int32, id: Int)?>(nil)

    init(directoryPath: String) {
        self.directoryPath = directoryPath
    }

    func start(reportingTo sink: ChangeEventSink) -> Bool {
        stop()
        guard let added = InotifyHub.shared.add(directoryPath, sink: sink) else { return false }
        registration.withLock { $0 = added }
        return true
    }

    func rearm() {}  // the watch is on the folder, whose files come and go under it

    func stop() {
        guard
            let removed = registration.withLock({ current -> (wd: Int32, id: Int)? in
                defer { current = nil }
                return current
            })
        else { return }
        InotifyHub.shared.remove(wd: removed.wd, id: removed.id)
    }
}

/// The process's one inotify instance and who listens to which watch.
private final class InotifyHub: Sendable {
    static let shared = InotifyHub()

    private struct State {
        var fd: Int32 = -1
        var source: (any DispatchSourceRead)?
        var sinks: [Int32: [Int: ChangeEventSink]] = [:]
        var nextID = 0
    }

    private let state = Locked(State())
    private let queue = DispatchQueue(label: "TinyStorage.inotify", qos: .utility)

    func add(_ path: String, sink: ChangeEventSink) -> (wd: Int32, id: Int)? {
        state.withLock { state in
            if state.fd < 0 {
                let fd = ts_inotify_init()
                guard fd >= 0 else { return nil }
                state.fd = fd
                let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
                source.setEventHandler { [self] in
                    readEvents()
                    pause()
                }
                source.resume()
                state.source = source
            }
            let wd = ts_inotify_add_watch(state.fd, path, ts_inotify_mask_names_and_attributes())
            guard wd >= 0 else { return nil }
            state.nextID += 1
            state.sinks[wd, default: [:]][state.nextID] = sink
            return (wd, state.nextID)
        }
    }

    func remove(wd: Int32, id: Int) {
        state.withLock { state in
            state.sinks[wd]?[id] = nil
            if state.sinks[wd]?.isEmpty == true {
                state.sinks[wd] = nil
                _ = ts_inotify_rm_watch(state.fd, wd)
            }
        }
    }

    /// How long the hub stops reading after each read, so a burst of events (a compaction renames
    /// and removes several names) costs one wake-up, not one each.
    static let coalescingPause: DispatchTimeInterval = .milliseconds(2)

    /// Stops reading for ``coalescingPause``; the kernel keeps the events meanwhile.
    private func pause() {
        state.withLock { $0.source?.suspend() }
        queue.asyncAfter(deadline: .now() + Self.coalescingPause) { [self] in
            state.withLock { $0.source?.resume() }
        }
    }

    /// Drains the descriptor and reports, once per watch, the strongest kind of event it had.
    private func readEvents() {
        var kinds: [Int32: ChangeEvent] = [:]
        var overflow = false
        let fd = state.withLock { $0.fd }
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            buffer.withUnsafeBytes { raw in
                var offset = 0
                while offset + 16 <= count {
                    let wd = raw.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                    let mask = raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                    let stated = raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)
                    let length = Int(truncatingIfNeeded: stated)
                    let event: ChangeEvent
                    switch ts_inotify_classify(mask) {
                    case 2: event = .lost
                    case 3:
                        overflow = true
                        event = .activity
                    case 1: event = .namesChanged
                    default: event = .activity
                    }
                    if wd >= 0 { kinds[wd] = Self.stronger(kinds[wd], event) }
                    offset += 16 + length
                }
            }
        }
        let deliveries: [(ChangeEventSink, ChangeEvent)] = state.withLock { state in
            if overflow {
                return state.sinks.flatMap { wd, sinks in sinks.values.map { ($0, kinds[wd] ?? .activity) } }
            }
            return kinds.flatMap { wd, event in (state.sinks[wd]?.values).map { $0.map { ($0, event) } } ?? [] }
        }
        for (sink, event) in deliveries { sink.receive(event) }
    }

    private static func stronger(_ current: ChangeEvent?, _ new: ChangeEvent) -> ChangeEvent {
        let rank: [ChangeEvent: Int] = [.published: 0, .activity: 1, .namesChanged: 2, .lost: 3]
        guard let current, rank[current, default: 0] >= rank[new, default: 0] else { return new }
        return current
    }
}
#endif
