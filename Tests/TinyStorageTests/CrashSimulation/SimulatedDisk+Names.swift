import Testing

@testable import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// The simulated disk's calls on names: opening, creating, renaming, removing, listing.

extension SimulatedDisk {
    var effectiveUserID: UInt32 { Self.user }

    var bootIdentity: BootIdentity { withState { $0.boot } }

    func openDirectory(atPath path: String) -> Result<Int32, Errno> {
        withState { state in
            if let error = begin(&state, changes: false) { return .failure(error) }
            return state.locate(path, from: State.rootInode, followLast: true).flatMap { location in
                guard let inode = location.inode, let node = state.nodes[inode] else { return .failure(.notFound) }
                guard node.kind == .directory else { return .failure(.notDirectory) }
                return .success(
                    Self.newDescriptor(
                        &state, Descriptor(inode: inode, readable: false, writable: false, pathOnly: true)))
            }
        }
    }

    /// `mkdir(path, mode)` for each missing component of `path`, like `mkdir -p`.
    func makeDirectories(atPath path: String, mode: mode_t) -> Result<Void, Errno> {
        var prefix = ""
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += "/" + component
            switch makeDirectory(atPath: prefix, mode: mode) {
            case .success, .failure(.exists): continue
            case .failure(let error): return .failure(error)
            }
        }
        return .success(())
    }

    /// `mkdir(path, mode)`.
    func makeDirectory(atPath path: String, mode: mode_t) -> Result<Void, Errno> {
        withState { state in
            if state.isCrashed { return .failure(.ioError) }
            return state.locate(path, from: State.rootInode, followLast: false).flatMap { location in
                makeDirectory(at: location, mode: mode, &state)
            }
        }
    }

    func makeDirectory(in directory: Int32, _ name: String, path: String, mode: mode_t) -> Result<Void, Errno> {
        withState { state in
            Self.locate(name, in: directory, followLast: false, &state).flatMap { location in
                makeDirectory(at: location, mode: mode, &state)
            }
        }
    }

    private func makeDirectory(at location: Location, mode: mode_t, _ state: inout State) -> Result<Void, Errno> {
        if location.inode != nil { return .failure(.exists) }
        if let error = begin(&state, changes: true) { return .failure(error) }
        _ = state.create(
            .directory, named: location.name, in: location.parent, permissions: UInt32(mode) & 0o7777, owner: Self.user)
        return .success(())
    }

    /// The simulated disk has no data protection: every item is `none`.
    func protectionClass(ofItemAt path: String) -> Result<ProtectionClass, Errno> {
        withState { state in
            if let error = begin(&state, changes: false) { return .failure(error) }
            return .success(.none)
        }
    }

    func removeDataProtection(ofItemAt path: String) -> Result<Void, Errno> {
        withState { state in
            if let error = begin(&state, changes: false) { return .failure(error) }
            return .success(())
        }
    }

    func open(in directory: Int32, _ name: String, flags: Int32, mode: mode_t) -> Result<Int32, Errno> {
        withState { state in
            Self.locate(name, in: directory, followLast: flags & O_NOFOLLOW == 0, &state).flatMap { location in
                openLocated(location, flags: flags, mode: mode, &state)
            }
        }
    }

    private func openLocated(
        _ location: Location, flags: Int32, mode: mode_t, _ state: inout State
    ) -> Result<Int32, Errno> {
        let access = flags & O_ACCMODE
        let readable = access == O_RDONLY || access == O_RDWR
        let writable = access == O_WRONLY || access == O_RDWR
        guard let inode = location.inode, let node = state.nodes[inode] else {
            guard flags & O_CREAT != 0 else { return .failure(.notFound) }
            if let error = begin(&state, changes: true) { return .failure(error) }
            let created = state.create(
                .regular, named: location.name, in: location.parent, permissions: UInt32(mode) & 0o7777,
                owner: Self.user)
            created.openCount += 1
            return .success(
                Self.newDescriptor(&state, Descriptor(inode: created.inode, readable: readable, writable: writable)))
        }
        if flags & O_CREAT != 0 && flags & O_EXCL != 0 { return .failure(.exists) }
        switch node.kind {
        case .symbolicLink: return .failure(.symbolicLinkLoop)  // only reached with O_NOFOLLOW
        case .directory:
            if writable { return .failure(.isDirectory) }
        case .fifo:
            if flags & O_DIRECTORY != 0 { return .failure(.notDirectory) }
            guard flags & O_NONBLOCK != 0 else {
                Issue.record("Opened the FIFO '\(location.name)' without O_NONBLOCK: the real call would hang")
                return .failure(.noSuchDeviceOrAddress)
            }
            if access == O_WRONLY { return .failure(.noSuchDeviceOrAddress) }  // no reader
        default:
            if flags & O_DIRECTORY != 0 { return .failure(.notDirectory) }
        }
        if flags & O_TRUNC != 0 && writable && node.kind == .regular {
            if let error = begin(&state, changes: true) { return .failure(error) }
            node.absorbMapping()
            node.record(.resize(0))
        } else if let error = begin(&state, changes: false) {
            return .failure(error)
        }
        node.openCount += 1
        return .success(Self.newDescriptor(&state, Descriptor(inode: inode, readable: readable, writable: writable)))
    }

    func status(in directory: Int32, _ name: String) -> Result<FileStatus, Errno> {
        withState { state in
            if let error = begin(&state, changes: false) { return .failure(error) }
            return Self.locate(name, in: directory, followLast: false, &state).flatMap { location in
                guard let inode = location.inode, let node = state.nodes[inode] else { return .failure(.notFound) }
                return .success(node.status())
            }
        }
    }

    func rename(in directory: Int32, _ source: String, to destination: String) -> Result<Void, Errno> {
        withState { state in rename(in: directory, source, to: destination, replacing: true, &state) }
    }

    func renameWithoutReplacing(in directory: Int32, _ source: String, to destination: String) -> Result<Void, Errno> {
        withState { state in rename(in: directory, source, to: destination, replacing: false, &state) }
    }

    private func rename(
        in directory: Int32, _ source: String, to destination: String, replacing: Bool, _ state: inout State
    ) -> Result<Void, Errno> {
        let from: Location
        let to: Location
        switch (
            Self.locate(source, in: directory, followLast: false, &state),
            Self.locate(destination, in: directory, followLast: false, &state)
        ) {
        case (.failure(let error), _), (_, .failure(let error)): return .failure(error)
        case (.success(let a), .success(let b)):
            from = a
            to = b
        }
        guard let moving = from.inode, let node = state.nodes[moving] else { return .failure(.notFound) }
        guard from.parent == to.parent else { return .failure(Errno(EXDEV)) }
        if let replaced = to.inode, let old = state.nodes[replaced] {
            guard replacing else { return .failure(.exists) }
            if replaced == moving { return .success(()) }
            if old.kind == .directory && node.kind != .directory { return .failure(.isDirectory) }
            if old.kind != .directory && node.kind == .directory { return .failure(.notDirectory) }
            if old.kind == .directory && !old.entries.isEmpty { return .failure(Errno(ENOTEMPTY)) }
        }
        if let error = begin(&state, changes: true) { return .failure(error) }
        if let replaced = to.inode { state.nodes[replaced]?.linkCount -= 1 }
        guard let parent = state.nodes[from.parent] else { return .failure(.notFound) }
        let change = NamespaceChange.rename(from: from.name, to: to.name)
        change.apply(to: &parent.entries)
        parent.pendingNamespace.append(change)
        return .success(())
    }

    func unlink(in directory: Int32, _ name: String) -> Result<Void, Errno> {
        withState { state in
            Self.locate(name, in: directory, followLast: false, &state).flatMap { location in
                guard let inode = location.inode, let node = state.nodes[inode],
                    let parent = state.nodes[location.parent]
                else { return .failure(.notFound) }
                if node.kind == .directory { return .failure(.isDirectory) }
                if let error = begin(&state, changes: true) { return .failure(error) }
                node.linkCount -= 1
                let change = NamespaceChange.unlink(name: location.name)
                change.apply(to: &parent.entries)
                parent.pendingNamespace.append(change)
                return .success(())
            }
        }
    }

    func entries(of directory: Int32) -> Result<[String], Errno> {
        withState { state in
            if let error = begin(&state, changes: false) { return .failure(error) }
            return Self.node(of: directory, &state).flatMap { node, descriptor in
                guard node.kind == .directory else { return .failure(.notDirectory) }
                if descriptor.pathOnly { return .failure(Errno(EBADF)) }
                return .success(node.entries.keys.sorted())
            }
        }
    }
}
