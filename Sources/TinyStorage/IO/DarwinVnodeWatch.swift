#if canImport(Darwin)
import Darwin
import Dispatch

/// Apple platforms: a vnode watch through a Dispatch file-system source (kqueue `EVFILT_VNODE`),
/// the adapter ``VnodeEventSource`` watches with. It only reports events: what they mean, and
/// re-arming, are the source's (shared with Linux, where ``InotifyVnodeWatch`` stands in).
final class DarwinVnodeWatch: VnodeWatch {
    private let source: any DispatchSourceFileSystemObject

    fileprivate init(_ source: any DispatchSourceFileSystemObject) {
        self.source = source
    }

    func cancel() { source.cancel() }

    /// One queue for every watch's handlers: they only hand events on, which never blocks.
    fileprivate static let queue = DispatchQueue(label: "TinyStorage.vnode", qos: .utility)
}

/// Starts a watch on `path` for `events`; `nil` when it cannot be opened (missing, or not
/// something the store would use).
///
/// `O_EVTONLY`: for event notifications only, so the watch never keeps a volume from being
/// unmounted. `O_NOFOLLOW`: a symbolic link planted at the name fails with `ELOOP` instead of
/// watching what it points to (the store never follows one, see ``StoreFolder``). `O_NONBLOCK`:
/// a FIFO planted at the name cannot block the open. See: man 2 open.
func startVnodeWatch(
    _ path: String, for events: VnodeEvents, handler: @escaping @Sendable (VnodeEvents) -> Void
) -> (any VnodeWatch)? {
    let fd = open(path, O_EVTONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    let source = DispatchSource.makeFileSystemObjectSource(
        fileDescriptor: fd, eventMask: events.dispatchEvents, queue: DarwinVnodeWatch.queue)
    source.setEventHandler { [weak source] in
        guard let source else { return }
        handler(VnodeEvents(source.data))
    }
    // NB: the descriptor is closed only once the source is cancelled: closing it earlier could
    // let a new descriptor with the same number be watched by mistake. See: Apple's
    // DispatchSourceProtocol.setCancelHandler(handler:).
    source.setCancelHandler { close(fd) }
    source.resume()
    return DarwinVnodeWatch(source)
}

extension VnodeEvents {
    /// Each event beside Dispatch's name for it (`NOTE_WRITE` … `NOTE_REVOKE`).
    private static var dispatchPairs: [(VnodeEvents, DispatchSource.FileSystemEvent)] {
        [
            (.write, .write), (.extend, .extend), (.attrib, .attrib), (.link, .link), (.rename, .rename),
            (.delete, .delete), (.revoke, .revoke),
        ]
    }

    /// These events as Dispatch names them.
    fileprivate var dispatchEvents: DispatchSource.FileSystemEvent {
        Self.dispatchPairs.reduce(into: []) { events, pair in if contains(pair.0) { events.insert(pair.1) } }
    }

    /// The events Dispatch reported.
    fileprivate init(_ dispatchEvents: DispatchSource.FileSystemEvent) {
        self = Self.dispatchPairs.reduce(into: []) { events, pair in
            if dispatchEvents.contains(pair.1) { events.insert(pair.0) }
        }
    }
}
#endif
