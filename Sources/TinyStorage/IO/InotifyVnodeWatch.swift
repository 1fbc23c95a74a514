#if os(Linux) || os(Android)
import CTinyStorageShims
import Dispatch
import Glibc

/// Apple semantics on Linux: a vnode watch made of inotify, standing in for the Dispatch
/// file-system source Apple platforms use (``DarwinVnodeWatch``), so that ``VnodeEventSource``'s
/// logic runs here with the events Darwin delivers: a folder's entries changing as `.write`, a
/// folder made inside it as `.link`, a file's writes as `.write` and `.extend`, the watched thing
/// renamed, removed or its watch ended as `.rename`, `.delete`, `.revoke`. Like a Dispatch source,
/// it coalesces what arrives while its handler is pending into one set of events. A link at the
/// path is never watched through (`IN_DONT_FOLLOW`, as `O_NOFOLLOW` on Apple platforms).
final class InotifyVnodeWatch: VnodeWatch {
    private let wd: Int32
    private let id: Int

    fileprivate init(wd: Int32, id: Int) {
        self.wd = wd
        self.id = id
    }

    func cancel() { VnodeHub.shared.remove(wd: wd, id: id) }
}

/// Starts a watch on `path` for `events` (see ``InotifyVnodeWatch``); `nil` when it cannot be
/// made (missing, or a link).
func startVnodeWatch(
    _ path: String, for events: VnodeEvents, handler: @escaping @Sendable (VnodeEvents) -> Void
) -> (any VnodeWatch)? {
    var status = stat()
    guard lstat(path, &status) == 0 else { return nil }
    let isFolder = status.st_mode & S_IFMT == S_IFDIR
    guard isFolder || status.st_mode & S_IFMT == S_IFREG else { return nil }
    guard let (wd, id) = VnodeHub.shared.add(path, folder: isFolder, events: events, handler: handler) else {
        return nil
    }
    return InotifyVnodeWatch(wd: wd, id: id)
}

/// The process's one inotify instance for vnode watches, and who listens to which watch.
private final class VnodeHub: Sendable {
    static let shared = VnodeHub()

    private struct Listener {
        var folder: Bool
        var events: VnodeEvents
        var handler: @Sendable (VnodeEvents) -> Void
    }

    private struct State {
        var fd: Int32 = -1
        var source: (any DispatchSourceRead)?
        var listeners: [Int32: [Int: Listener]] = [:]
        var nextID = 0
    }

    private let state = Locked(State())
    private let queue = DispatchQueue(label: "TinyStorage.vnode", qos: .utility)

    func add(
        _ path: String, folder: Bool, events: VnodeEvents, handler: @escaping @Sendable (VnodeEvents) -> Void
    ) -> (wd: Int32, id: Int)? {
        state.withLock { state in
            if state.fd < 0 {
                let fd = ts_inotify_init()
                guard fd >= 0 else { return nil }
                state.fd = fd
                let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
                source.setEventHandler { [self] in readEvents() }
                source.resume()
                state.source = source
            }
            let wd = ts_inotify_add_watch(state.fd, path, ts_inotify_mask_vnode(folder))
            guard wd >= 0 else { return nil }
            state.nextID += 1
            state.listeners[wd, default: [:]][state.nextID] = Listener(folder: folder, events: events, handler: handler)
            return (wd, state.nextID)
        }
    }

    func remove(wd: Int32, id: Int) {
        state.withLock { state in
            state.listeners[wd]?[id] = nil
            if state.listeners[wd]?.isEmpty == true {
                state.listeners[wd] = nil
                _ = ts_inotify_rm_watch(state.fd, wd)
            }
        }
    }

    /// Drains the descriptor and hands each listener, once, the events its watch had.
    private func readEvents() {
        var masks: [Int32: UInt32] = [:]
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
                    masks[wd, default: 0] |= mask
                    offset += 16 + length
                }
            }
        }
        let deliveries: [(@Sendable (VnodeEvents) -> Void, VnodeEvents)] = state.withLock { state in
            masks.flatMap { wd, mask in
                (state.listeners[wd]?.values).map { listeners in
                    listeners.compactMap { listener in
                        let events = VnodeEvents(rawValue: ts_inotify_vnode_flags(mask, listener.folder))
                            .intersection(listener.events.union(.revoke))
                        return events.isEmpty ? nil : (listener.handler, events)
                    }
                } ?? []
            }
        }
        for (handler, events) in deliveries { handler(events) }
    }
}
#endif
