import Testing

@testable import TinyStorage

// What a test does to a simulated disk from outside the store: plant files, look at them, damage
// them. None of this counts as an operation or fails after a crash.

extension SimulatedDisk {
    /// Creates `path` and its missing parents, and makes the whole tree durable, as a container
    /// that existed long before the store.
    func makeSettledDirectories(atPath path: String) {
        if case .failure(let error) = makeDirectories(atPath: path, mode: 0o700) {
            Issue.record("Could not create \(path) on the simulated disk: \(error)")
        }
        settle()
    }

    /// Makes everything on the disk durable, as if every file and directory had been synced.
    func settle() {
        withState { state in
            for node in state.nodes.values { node.makeDurable() }
        }
    }

    /// Creates or replaces the regular file at `path` (its parent must exist) with `contents`,
    /// durable unless `durable` is `false`.
    func plantFile(atPath path: String, contents: [UInt8], durable: Bool = true) {
        withState { state in
            guard let location = locateForPlanting(path, &state) else { return }
            let node: Node
            if let inode = location.inode, let existing = state.nodes[inode], existing.kind == .regular {
                node = existing
                node.record(.resize(0))
            } else {
                node = state.create(
                    .regular, named: location.name, in: location.parent, permissions: 0o600, owner: Self.user)
            }
            node.record(.write(offset: 0, bytes: contents))
            if durable {
                node.makeDurable()
                state.nodes[location.parent]?.makeDurable()
            }
        }
    }

    /// Plants a symbolic link at `path` pointing to `target`, durably.
    func plantSymbolicLink(atPath path: String, to target: String) {
        plantNode(.symbolicLink, atPath: path) { $0.target = target }
    }

    /// Plants a FIFO (named pipe) at `path`, durably.
    func plantFIFO(atPath path: String) {
        plantNode(.fifo, atPath: path) { _ in }
    }

    /// Gives the existing file at `existing` a second name, `path`, durably (`link(2)`).
    func plantHardLink(atPath path: String, to existing: String) {
        withState { state in
            guard case .success(let source) = state.locate(existing, from: State.rootInode, followLast: false),
                let inode = source.inode, let node = state.nodes[inode],
                let location = locateForPlanting(path, &state)
            else {
                Issue.record("Cannot link \(path) to \(existing) on the simulated disk")
                return
            }
            state.link(inode, as: location.name, in: location.parent)
            node.linkCount += 1
            state.nodes[location.parent]?.makeDurable()
        }
    }

    /// Changes the owner and permissions of what is at `path` (without following a link).
    func setOwnership(atPath path: String, owner: UInt32? = nil, permissions: UInt32? = nil) {
        withState { state in
            guard let node = Self.nodeForInspection(path, state) else { return }
            if let owner { node.owner = owner }
            if let permissions { node.permissions = permissions }
        }
    }

    /// Makes what is at `path` durable, as `fsync` on it would (for a directory: its names).
    func makeDurable(atPath path: String) {
        withState { state in Self.nodeForInspection(path, state)?.makeDurable() }
    }

    /// Media damage: the file at `path` cut to `length` bytes, durably (a partial copy, a restore,
    /// a broken disk), whatever was flushed.
    func cutDurably(atPath path: String, to length: Int) {
        withState { state in
            guard let node = Self.nodeForInspection(path, state), node.kind == .regular else { return }
            node.absorbMapping()
            node.record(.resize(min(length, node.size)))
            node.makeDurable()
        }
    }

    /// Media damage: `bytes` written over the file at `path` at `offset`, durably.
    func overwriteDurably(atPath path: String, offset: Int, with bytes: [UInt8]) {
        withState { state in
            guard let node = Self.nodeForInspection(path, state), node.kind == .regular else { return }
            node.absorbMapping()
            node.record(.write(offset: offset, bytes: bytes))
            node.makeDurable()
        }
    }

    // MARK: Looking

    /// What a read of the file at `path` would return now, or `nil` when no regular file is there.
    func contents(atPath path: String) -> [UInt8]? {
        withState { state in
            guard let node = Self.nodeForInspection(path, state), node.kind == .regular else { return nil }
            if !state.isCrashed { node.absorbMapping() }
            return node.contents
        }
    }

    /// The durable contents of the file at `path`.
    func durableContents(atPath path: String) -> [UInt8]? {
        withState { state in Self.nodeForInspection(path, state)?.durableContents }
    }

    /// The names in the directory at `path`, sorted, or `nil` when no directory is there.
    func names(inDirectoryAtPath path: String) -> [String]? {
        withState { state in
            guard let node = Self.nodeForInspection(path, state), node.kind == .directory else { return nil }
            return node.entries.keys.sorted()
        }
    }

    /// What `fstatat(AT_SYMLINK_NOFOLLOW)` would report for `path`, or `nil` when nothing is there.
    func status(atPath path: String) -> FileStatus? {
        withState { state in Self.nodeForInspection(path, state)?.status() }
    }

    /// How many times the store opened what is at `path`.
    func timesOpened(atPath path: String) -> Int {
        withState { state in Self.nodeForInspection(path, state)?.openCount ?? 0 }
    }

    /// Whether the file at `path` has changes not yet flushed.
    func hasPendingChanges(atPath path: String) -> Bool {
        withState { state in
            guard let node = Self.nodeForInspection(path, state) else { return false }
            if !state.isCrashed { node.absorbMapping() }
            return !node.pendingChanges.isEmpty || !node.pendingNamespace.isEmpty
        }
    }

    /// Whether the file's unflushed changes reach outside `range`: what a read sees and what
    /// survives any crash differ in length or in a byte outside `range`.
    func hasPendingChanges(atPath path: String, outside range: Range<Int>) -> Bool {
        withState { state in
            guard let node = Self.nodeForInspection(path, state) else { return false }
            if !state.isCrashed { node.absorbMapping() }
            guard node.contents.count == node.durableContents.count else { return true }
            return zip(node.contents, node.durableContents).enumerated().contains { index, pair in
                pair.0 != pair.1 && !range.contains(index)
            }
        }
    }

    // MARK: Helpers

    private func plantNode(_ kind: FileStatus.Kind, atPath path: String, configure: (Node) -> Void) {
        withState { state in
            guard let location = locateForPlanting(path, &state) else { return }
            let node = state.create(
                kind, named: location.name, in: location.parent, permissions: 0o600, owner: Self.user)
            configure(node)
            state.nodes[location.parent]?.makeDurable()
        }
    }

    private func locateForPlanting(_ path: String, _ state: inout State) -> Location? {
        guard case .success(let location) = state.locate(path, from: State.rootInode, followLast: false),
            state.nodes[location.parent]?.kind == .directory
        else {
            Issue.record("The parent of \(path) is not a directory on the simulated disk")
            return nil
        }
        return location
    }

    private static func nodeForInspection(_ path: String, _ state: State) -> Node? {
        guard case .success(let location) = state.locate(path, from: State.rootInode, followLast: false),
            let inode = location.inode
        else { return nil }
        return state.nodes[inode]
    }
}
