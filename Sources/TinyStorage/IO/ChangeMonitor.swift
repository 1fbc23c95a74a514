import Dispatch

#if canImport(Glibc)
import CTinyStorageShims
import Glibc
#elseif canImport(Musl)
import CTinyStorageShims
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Something that wants to hear when a store's files change on disk.
protocol FileChangeListener: AnyObject, Sendable {
    func filesDidChange()
}

/// Watches store directories for changes made by any process and tells their listeners.
///
/// Linux: one `inotify(7)` instance for the whole process (the per-user limit on instances is
/// small), one watch per store directory, read by a Dispatch source. Apple platforms: a Dispatch
/// file-system source (kqueue `EVFILT_VNODE`) on the directory, which sees files being replaced,
/// and one on the data file, which sees appends. Events only prompt the listener to look: the
/// store's shared counter decides whether anything changed, so spurious events cost little.
final class ChangeMonitor: Sendable {
    static let shared = ChangeMonitor()

    let queue = DispatchQueue(label: "TinyStorage.changeMonitor", qos: .utility)
    /// How long the monitor waits after handling events before it looks again.
    static let coalescingDelay: DispatchTimeInterval = .milliseconds(2)

    /// Keeps a watch alive; dropping it stops watching.
    final class Watch: Sendable {
        fileprivate let stop: @Sendable () -> Void
        fileprivate init(stop: @escaping @Sendable () -> Void) { self.stop = stop }
        deinit { stop() }
    }

    #if os(Linux) || os(Android)
    private struct Registration {
        weak var listener: (any FileChangeListener)?
    }

    private struct State {
        var fd: Int32 = -1
        var source: (any DispatchSourceRead)?
        var listeners: [Int32: [ObjectIdentifier: Registration]] = [:]
        var lateLooksScheduled = false
        var eventDuringLateLooks = false
    }

    private let state = Locked(State())

    /// Starts watching `directoryPath` for `listener`, or returns `nil` when the system refuses
    /// (the directory is missing, or inotify limits are reached): the store then notices other
    /// processes' commits on its next access instead of within milliseconds.
    func watch(directoryPath: String, dataFilePath: String, listener: any FileChangeListener) -> Watch? {
        let id = ObjectIdentifier(listener)
        let wd: Int32? = state.withLock { state in
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
            let wd = ts_inotify_add_watch(state.fd, directoryPath, ts_inotify_mask_modify_and_moves())
            guard wd >= 0 else { return nil }
            state.listeners[wd, default: [:]][id] = Registration(listener: listener)
            return wd
        }
        guard let wd else { return nil }
        return Watch { [self] in
            state.withLock { state in
                state.listeners[wd]?[id] = nil
                if state.listeners[wd]?.isEmpty == true {
                    state.listeners[wd] = nil
                    _ = ts_inotify_rm_watch(state.fd, wd)
                }
            }
        }
    }

    /// Stops reading events for ``coalescingDelay``.
    ///
    /// NB: every commit writes to a watched directory, this process's own included. Pausing
    /// briefly lets a burst of events coalesce in the kernel into one wake-up.
    private func pause() {
        state.withLock { $0.source?.suspend() }
        queue.asyncAfter(deadline: .now() + Self.coalescingDelay) { [self] in
            state.withLock { $0.source?.resume() }
            lookAgain()
        }
        scheduleLateLooks()
    }

    /// Asks every listener to look again; each answers from its lock-free copy when nothing changed.
    private func lookAgain() {
        let listeners = state.withLock { state in
            state.listeners.values.flatMap { $0.values.compactMap(\.listener) }
        }
        for listener in listeners { listener.filesDidChange() }
    }

    /// NB: a writer appends its record (the file event) before it bumps the shared counter (no
    /// event). A look 2 ms after the event finds almost every commit; a writer descheduled between
    /// the two steps is caught by these later looks. One chain runs at a time however busy the
    /// store; an event during a chain starts another chain when it ends, so the last look always
    /// comes at least 2 s after the last event.
    private func scheduleLateLooks() {
        let start = state.withLock { state in
            if state.lateLooksScheduled {
                // An event during a chain: when this chain ends, run another one after it.
                state.eventDuringLateLooks = true
                return false
            }
            state.lateLooksScheduled = true
            return true
        }
        guard start else { return }
        for (index, delay) in Self.lateLookDelays.enumerated() {
            queue.asyncAfter(deadline: .now() + delay) { [self] in
                lookAgain()
                guard index == Self.lateLookDelays.count - 1 else { return }
                let again = state.withLock { state in
                    state.lateLooksScheduled = false
                    defer { state.eventDuringLateLooks = false }
                    return state.eventDuringLateLooks
                }
                if again { scheduleLateLooks() }
            }
        }
    }

    static let lateLookDelays: [DispatchTimeInterval] = [
        .milliseconds(20), .milliseconds(100), .milliseconds(500), .seconds(2),
    ]

    /// Drains the inotify descriptor and tells the listeners of every directory that had events.
    private func readEvents() {
        var touched = Set<Int32>()
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
                    let length = Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                    if wd < 0 { overflow = true } else { touched.insert(wd) }
                    offset += 16 + length
                }
            }
        }
        let listeners: [any FileChangeListener] = state.withLock { state in
            let watches = overflow ? Array(state.listeners.keys) : Array(touched)
            return watches.flatMap { state.listeners[$0]?.values.compactMap(\.listener) ?? [] }
        }
        for listener in listeners { listener.filesDidChange() }
    }

    #elseif canImport(Darwin)

    /// Starts watching the store's directory and data file for `listener`, or returns `nil` when
    /// the directory cannot be opened for events.
    func watch(directoryPath: String, dataFilePath: String, listener: any FileChangeListener) -> Watch? {
        let watcher = DarwinWatcher(
            directoryPath: directoryPath, dataFilePath: dataFilePath, queue: queue, listener: listener)
        guard watcher.start() else { return nil }
        return Watch { watcher.cancel() }
    }

    #else

    func watch(directoryPath: String, dataFilePath: String, listener: any FileChangeListener) -> Watch? {
        nil
    }

    #endif
}

#if canImport(Darwin) && !os(Linux)
/// The Apple-platform watcher: a vnode source on the directory (files added, renamed, replaced)
/// and one on the data file (appends by any process), re-armed when compaction replaces the file.
private final class DarwinWatcher: @unchecked Sendable {
    // @unchecked: the sources are created, replaced and cancelled only on `queue`.
    private let directoryPath: String
    private let dataFilePath: String
    private let queue: DispatchQueue
    private weak var listener: (any FileChangeListener)?
    private var directorySource: (any DispatchSourceFileSystemObject)?
    private var fileSource: (any DispatchSourceFileSystemObject)?

    init(directoryPath: String, dataFilePath: String, queue: DispatchQueue, listener: any FileChangeListener) {
        self.directoryPath = directoryPath
        self.dataFilePath = dataFilePath
        self.queue = queue
        self.listener = listener
    }

    func start() -> Bool {
        queue.sync {
            directorySource = makeSource(path: directoryPath, events: [.write, .attrib, .rename, .delete, .link])
            armFileSource()
            return directorySource != nil
        }
    }

    func cancel() {
        queue.async { [self] in
            directorySource?.cancel()
            fileSource?.cancel()
            directorySource = nil
            fileSource = nil
        }
    }

    /// Watches the current data file; called again whenever the directory changes, since
    /// compaction renames a new file over the old one.
    private func armFileSource() {
        fileSource?.cancel()
        fileSource = makeSource(path: dataFilePath, events: [.write, .extend, .attrib, .delete, .rename])
    }

    private func makeSource(
        path: String, events: DispatchSource.FileSystemEvent
    ) -> (any DispatchSourceFileSystemObject)? {
        let fd = open(path, O_EVTONLY)
        guard fd >= 0 else { return nil }
        let source = DispatchSource.makeFileSystemObjectSource(fileDescriptor: fd, eventMask: events, queue: queue)
        source.setEventHandler { [weak self, weak source] in
            guard let self, let source else { return }
            let mask = source.data
            if source === self.directorySource || mask.contains(.delete) || mask.contains(.rename) {
                self.armFileSource()
            }
            self.listener?.filesDidChange()
            // NB: a writer appends (the event) before it bumps the shared counter (no event): look
            // again shortly in case this event arrived in between.
            self.queue.asyncAfter(deadline: .now() + ChangeMonitor.coalescingDelay) { [weak self] in
                self?.listener?.filesDidChange()
            }
        }
        source.setCancelHandler { close(fd) }
        source.resume()
        return source
    }
}
#endif
