/// What kqueue's `EVFILT_VNODE` reports about one file or folder (see man 2 kqueue), on Apple
/// platforms from Dispatch file-system sources (``DarwinVnodeWatch``), on Linux with Apple
/// semantics from inotify standing in for them (``InotifyVnodeWatch``).
struct VnodeEvents: OptionSet, Sendable, Hashable {
    let rawValue: UInt32

    /// `NOTE_WRITE`: a file was written; a folder's entries were added, removed or renamed.
    static let write = VnodeEvents(rawValue: 1)
    /// `NOTE_EXTEND`: a file grew.
    static let extend = VnodeEvents(rawValue: 2)
    /// `NOTE_ATTRIB`: its attributes changed (a file made readable again).
    static let attrib = VnodeEvents(rawValue: 4)
    /// `NOTE_LINK`: its link count changed (a folder made inside a folder).
    static let link = VnodeEvents(rawValue: 8)
    /// `NOTE_RENAME`: it was renamed (a compaction renamed a new data file over it).
    static let rename = VnodeEvents(rawValue: 16)
    /// `NOTE_DELETE`: it was removed.
    static let delete = VnodeEvents(rawValue: 32)
    /// `NOTE_REVOKE`: access to it was revoked (its volume unmounted); the watch has ended.
    static let revoke = VnodeEvents(rawValue: 64)

    /// Gone from under its name: removed, renamed or revoked.
    static let gone: VnodeEvents = [.rename, .delete, .revoke]
}

/// One started watch on a path; ``cancel()`` ends it, once, from any thread.
protocol VnodeWatch: Sendable {
    func cancel()
}

/// Apple semantics: reports vnode events on a store's folder (names created, renamed, removed;
/// the folder itself going away) and on its data file (appends by any process, which write with
/// `pwrite(2)`). There is no direct signal from a writer: another process's commit is seen
/// through the data file's write events, then the watcher's later looks. See ``ChangeEventSource``.
///
/// The data file is watched by identity: when it is replaced, the watcher calls ``rearm()`` to
/// watch the new one. This is the logic; the watches themselves come from the platform's adapter
/// (``startVnodeWatch(_:for:handler:)``), which only reports events.
final class VnodeEventSource: LosableSource {
    private let directoryPath: String
    private let dataFilePath: String

    private struct Watches {
        var directory: (any VnodeWatch)?
        var file: (any VnodeWatch)?
        var sink: ChangeEventSink?
    }

    private let watches = Locked(Watches())

    init(directoryPath: String, dataFilePath: String) {
        self.directoryPath = directoryPath
        self.dataFilePath = dataFilePath
    }

    /// The folder: its entries changing is a name change; the folder itself going is a lost watch.
    static let folderEvents: VnodeEvents = [.write, .link, .rename, .delete, .revoke]
    /// The data file: a write is activity; the file going from under its name is a name change
    /// (the folder's watch says so too, in its own order), which re-arms this watch.
    static let dataFileEvents: VnodeEvents = [.write, .extend, .attrib, .rename, .delete, .revoke]

    static func meaning(ofFolderEvents events: VnodeEvents) -> ChangeEvent {
        events.isDisjoint(with: .gone) ? .namesChanged : .lost
    }

    static func meaning(ofDataFileEvents events: VnodeEvents) -> ChangeEvent {
        events.isDisjoint(with: .gone) ? .activity : .namesChanged
    }

    func start(reportingTo sink: ChangeEventSink) -> Bool {
        let directory = startVnodeWatch(directoryPath, for: Self.folderEvents) { events in
            sink.receive(Self.meaning(ofFolderEvents: events))
        }
        guard let directory else {
            stop()
            return false
        }
        let file = watchDataFile(sink)
        // NB: swapped in one step, and whatever was there cancelled: two starts at once (the
        // watcher's queue and a thread that opened the store) must not leave a watch running
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
        let replaced = watches.withLock { watches -> (any VnodeWatch)? in
            guard let sink = watches.sink else { return nil }
            defer { watches.file = watchDataFile(sink) }
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

    /// A watch on the data file, or `nil` while there is none (a new store).
    private func watchDataFile(_ sink: ChangeEventSink) -> (any VnodeWatch)? {
        startVnodeWatch(dataFilePath, for: Self.dataFileEvents) { events in
            sink.receive(Self.meaning(ofDataFileEvents: events))
        }
    }
}
