#if canImport(Darwin)
import Darwin
import Dispatch

/// Apple platforms: reports kqueue vnode events, through Dispatch file-system sources, on a
/// store's folder (names created, renamed, removed; the folder itself going away) and on its data
/// file (appends by any process, which write with `pwrite(2)` there). See ``ChangeEventSource``.
///
/// The data file is watched by identity: when it is replaced, the watcher calls ``rearm()`` to
/// watch the new one. Handlers only hand events to the sink, which never blocks.
final class DarwinEventSource: LosableSource {
    private let directoryPath: String
    private let dataFilePath: String
    private let queue = DispatchQueue(label: "TinyStorage.vnode", qos: .utility)

    private struct Watches {
        var directory: (any DispatchSourceFileSystemObject)?
        var file: (any DispatchSourceFileSystemObject)?
        var sink: ChangeEventSink?
    }

    private let watches = Locked(Watches())

    init(directoryPath: String, dataFilePath: String) {
        self.directoryPath = directoryPath
        self.dataFilePath = dataFilePath
    }

    func start(reportingTo sink: ChangeEventSink) -> Bool {
        let directory = Self.watch(
            directoryPath, events: [.write, .link, .rename, .delete, .revoke], queue: queue, sink: sink
        ) { events in
            events.contains(.delete) || events.contains(.rename) || events.contains(.revoke) ? .lost : .namesChanged
        }
        guard let directory else {
            stop()
            return false
        }
        let file = Self.watchDataFile(dataFilePath, queue: queue, sink: sink)
        // NB: swapped in one step, and whatever was there cancelled: two starts at once (the
        // watcher's queue and a thread that opened the store) must not leave a source running
        // that nothing will cancel.
        let replaced = watches.withLock { watches -> Watches in
            defer { watches = Watches(directory: directory, file: file, sink: sink) }
            return watches
        }
        replaced.directory?.cancel()
        replaced.file?.cancel()
        return true
    }

    func rearm() {
        let replaced = watches.withLock { watches -> (any DispatchSourceFileSystemObject)? in
            guard let sink = watches.sink else { return nil }
            defer { watches.file = Self.watchDataFile(dataFilePath, queue: queue, sink: sink) }
            return watches.file
        }
        replaced?.cancel()
    }

    func stop() {
        let old = watches.withLock { watches -> Watches in
            defer { watches = Watches() }
            return watches
        }
        old.directory?.cancel()
        old.file?.cancel()
    }

    private static func watchDataFile(
        _ path: String, queue: DispatchQueue, sink: ChangeEventSink
    ) -> (any DispatchSourceFileSystemObject)? {
        watch(path, events: [.write, .extend, .attrib, .delete, .rename, .revoke], queue: queue, sink: sink) {
            events in
            events.contains(.delete) || events.contains(.rename) || events.contains(.revoke) ? .namesChanged : .activity
        }
    }

    /// A started source on `path`, or `nil` when it cannot be opened (missing, or not something
    /// the store would use).
    ///
    /// `O_EVTONLY`: for event notifications only, so the watch never keeps a volume from being
    /// unmounted. `O_NOFOLLOW`: a symbolic link planted at the name fails with `ELOOP` instead of
    /// watching what it points to (the store never follows one, see ``StoreFolder``).
    /// `O_NONBLOCK`: a FIFO planted at the name cannot block the open. See: man 2 open.
    private static func watch(
        _ path: String, events: DispatchSource.FileSystemEvent, queue: DispatchQueue, sink: ChangeEventSink,
        meaning: @escaping @Sendable (DispatchSource.FileSystemEvent) -> ChangeEvent
    ) -> (any DispatchSourceFileSystemObject)? {
        let fd = open(path, O_EVTONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        let source = DispatchSource.makeFileSystemObjectSource(fileDescriptor: fd, eventMask: events, queue: queue)
        source.setEventHandler { [weak source] in
            guard let source else { return }
            sink.receive(meaning(source.data))
        }
        // NB: the descriptor is closed only once the source is cancelled: closing it earlier could
        // let a new descriptor with the same number be watched by mistake. See: Apple's
        // DispatchSourceProtocol.setCancelHandler(handler:).
        source.setCancelHandler { close(fd) }
        source.resume()
        return source
    }
}
#endif
