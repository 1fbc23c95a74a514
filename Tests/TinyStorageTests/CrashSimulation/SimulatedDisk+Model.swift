@testable import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// The simulated disk's inside: files, directories, what is durable, and path resolution. Only
// ever touched while holding the disk's lock (see `SimulatedDisk`).

extension SimulatedDisk {
    /// A change to a regular file since its last flush, in the order it was made.
    enum FileChange {
        /// `pwrite(2)` of `bytes` at `offset`.
        case write(offset: Int, bytes: [UInt8])
        /// `ftruncate(2)`, or the growth of `allocate`: the file's new size.
        case resize(Int)
        /// Sectors changed through a memory mapping, noticed at the next look at the file.
        case mapped([(sector: Int, bytes: [UInt8])])
    }

    /// A change to a directory's names since its last flush, in the order it was made.
    enum NamespaceChange {
        /// A file or directory created (or a hard link made) under `name`.
        case link(name: String, inode: UInt64)
        case unlink(name: String)
        case rename(from: String, to: String)

        func apply(to entries: inout [String: UInt64]) {
            switch self {
            case .link(let name, let inode): entries[name] = inode
            case .unlink(let name): entries[name] = nil
            case .rename(let from, let to):
                entries[to] = entries[from]
                entries[from] = nil
            }
        }
    }

    /// One file, directory, link or FIFO: an inode.
    final class Node {
        let inode: UInt64
        let kind: FileStatus.Kind
        var permissions: UInt32
        var owner: UInt32
        /// Names that refer to it (directories: 2).
        var linkCount = 1

        // Regular files: what a read sees, what survives any crash, and what happened between.
        var contents: [UInt8] = []
        var durableContents: [UInt8] = []
        var pendingChanges: [FileChange] = []
        var mapping: MappedRegion?

        // Directories.
        var parent: UInt64 = 0
        var entries: [String: UInt64] = [:]
        var durableEntries: [String: UInt64] = [:]
        var pendingNamespace: [NamespaceChange] = []

        /// Symbolic links: where they point.
        var target = ""
        /// How often it was opened (tests check that the store never opens a FIFO).
        var openCount = 0

        init(inode: UInt64, kind: FileStatus.Kind, permissions: UInt32, owner: UInt32) {
            self.inode = inode
            self.kind = kind
            self.permissions = permissions
            self.owner = owner
            if kind == .directory { linkCount = 2 }
        }

        var size: Int { contents.count }

        /// Applies `change` to `contents` (not to the pending list).
        static func apply(_ change: FileChange, to contents: inout [UInt8]) {
            switch change {
            case .write(let offset, let bytes):
                resize(&contents, to: max(contents.count, offset + bytes.count))
                place(bytes, in: &contents, at: offset)
            case .resize(let size):
                resize(&contents, to: size)
            case .mapped(let sectors):
                for (sector, bytes) in sectors { place(bytes, in: &contents, at: sector * SimulatedDisk.sectorSize) }
            }
        }

        /// Cuts `contents` to `size` bytes, or grows it with zeros.
        static func resize(_ contents: inout [UInt8], to size: Int) {
            if size < contents.count {
                contents.removeLast(contents.count - size)
            } else if size > contents.count {
                contents += [UInt8](repeating: 0, count: size - contents.count)
            }
        }

        /// Copies as much of `bytes` as fits into `contents` at `offset` (`memcpy`: this runs
        /// for every simulated write, in debug builds).
        static func place(_ bytes: [UInt8], in contents: inout [UInt8], at offset: Int) {
            let count = min(bytes.count, contents.count - offset)
            guard count > 0 else { return }
            contents.withUnsafeMutableBytes { target in
                bytes.withUnsafeBytes { source in
                    guard let to = target.baseAddress, let from = source.baseAddress else { return }
                    (to + offset).copyMemory(from: from, byteCount: count)
                }
            }
        }

        /// Makes `change` and remembers it until the next flush.
        func record(_ change: FileChange) {
            let before = contents.count
            Self.apply(change, to: &contents)
            pendingChanges.append(change)
            switch change {
            case .write(let offset, let bytes): mapping?.reflect(offset..<offset + bytes.count, of: contents)
            case .resize(let size): mapping?.reflect(min(before, size)..<max(before, size), of: contents)
            case .mapped: break
            }
        }

        /// Takes in what was written through the mapping since the last look, as one change.
        func absorbMapping() {
            guard let mapping else { return }
            let limit = min(contents.count, mapping.capacity)
            var changed: [(sector: Int, bytes: [UInt8])] = []
            var start = 0
            while start < limit {
                let end = min(start + SimulatedDisk.sectorSize, limit)
                let differs = contents.withUnsafeBytes {
                    memcmp($0.baseAddress! + start, mapping.base + start, end - start)
                }
                if differs != 0 {
                    changed.append(
                        (
                            start / SimulatedDisk.sectorSize,
                            Array(UnsafeRawBufferPointer(start: mapping.base + start, count: end - start))
                        ))
                }
                start = end
            }
            if !changed.isEmpty {
                let change = FileChange.mapped(changed)
                Self.apply(change, to: &contents)
                pendingChanges.append(change)
            }
        }

        /// A flush: everything written so far is durable.
        func makeDurable() {
            switch kind {
            case .regular:
                absorbMapping()
                durableContents = contents
                pendingChanges.removeAll()
            case .directory:
                durableEntries = entries
                pendingNamespace.removeAll()
            default:
                break
            }
        }

        func status() -> FileStatus {
            FileStatus(
                kind: kind, size: kind == .symbolicLink ? target.utf8.count : size, device: SimulatedDisk.device,
                inode: inode, linkCount: linkCount, owner: owner, permissions: permissions)
        }
    }

    /// The memory a file is mapped into: one region per file, shared by every mapping of it, as
    /// `MAP_SHARED` pages are, and never moved, so pointers into it stay valid as the file grows.
    final class MappedRegion {
        /// Address space reserved per mapped file; mapping more fails with `ENOMEM`.
        static let capacity = 64 << 20
        let base: UnsafeMutableRawPointer
        var capacity: Int { Self.capacity }
        var users = 0

        init?(contents: [UInt8]) {
            let address = mmap(
                nil, Self.capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
            guard let address, address != MAP_FAILED else { return nil }
            base = address
            contents.withUnsafeBytes { raw in
                if let source = raw.baseAddress { base.copyMemory(from: source, byteCount: min(raw.count, capacity)) }
            }
        }

        deinit { munmap(base, Self.capacity) }

        /// Shows bytes changed through a descriptor to every mapping, as the page cache does;
        /// bytes past the end of the file read as zeros.
        func reflect(_ range: Range<Int>, of contents: [UInt8]) {
            let end = min(range.upperBound, capacity)
            guard range.lowerBound < end else { return }
            let copied = max(range.lowerBound, min(end, contents.count))
            contents.withUnsafeBytes { raw in
                guard range.lowerBound < copied, let source = raw.baseAddress else { return }
                (base + range.lowerBound).copyMemory(
                    from: source + range.lowerBound, byteCount: copied - range.lowerBound)
            }
            if copied < end { (base + copied).initializeMemory(as: UInt8.self, repeating: 0, count: end - copied) }
        }
    }

    /// Where a path leads: the directory holding its last name, that name, and the inode under
    /// it (`nil` when nothing is there).
    struct Location {
        var parent: UInt64
        var name: String
        var inode: UInt64?
    }

    /// Everything the disk holds, guarded by the disk's lock.
    struct State {
        var nodes: [UInt64: Node] = [:]
        var nextInode: UInt64 = 2
        var descriptors: [Int32: Descriptor] = [:]
        var nextDescriptor: Int32 = 1000
        /// `flock` holders: inode → the descriptors holding a lock on it, and how.
        var lockHolders: [UInt64: [Int32: FileLockMode]] = [:]
        /// Mapped regions by base address, to the inode they map.
        var mappedInodes: [UnsafeMutableRawPointer: UInt64] = [:]
        /// Calls that change the disk, so far.
        var changeCount = 0
        var crashAtChange: Int?
        var isCrashed = false
        /// Threads waiting in `flock` for another descriptor's lock.
        var lockWaiters = 0
        var boot: BootIdentity

        static let rootInode: UInt64 = 1
    }

    /// An open file description.
    struct Descriptor {
        var inode: UInt64
        var readable: Bool
        var writable: Bool
        /// `O_PATH` (``FileSystem/openDirectory(atPath:)`` on Linux): usable only as the base of `*at` calls.
        var pathOnly = false
    }
}

extension SimulatedDisk.State {
    func node(_ inode: UInt64) -> SimulatedDisk.Node? { nodes[inode] }

    /// Resolves `path` from `start` (or from the root when it is absolute), following symbolic
    /// links on the way and, when `followLast`, at the end: `ENOENT`, `ENOTDIR`, `ELOOP` as the
    /// kernel answers.
    func locate(_ path: String, from start: UInt64, followLast: Bool) -> Result<SimulatedDisk.Location, Errno> {
        var hops = 0
        return locate(path, from: start, followLast: followLast, hops: &hops)
    }

    private func locate(
        _ path: String, from start: UInt64, followLast: Bool, hops: inout Int
    ) -> Result<SimulatedDisk.Location, Errno> {
        var current = path.hasPrefix("/") ? Self.rootInode : start
        let components = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard !components.isEmpty else {
            return .success(
                SimulatedDisk.Location(parent: nodes[current]?.parent ?? current, name: ".", inode: current))
        }
        for (index, component) in components.enumerated() {
            let isLast = index == components.count - 1
            guard let directory = nodes[current], directory.kind == .directory else { return .failure(.notDirectory) }
            let child: UInt64? =
                switch component {
                case ".": current
                case "..": directory.parent
                default: directory.entries[component]
                }
            guard let child, let node = nodes[child] else {
                return isLast
                    ? .success(SimulatedDisk.Location(parent: current, name: component, inode: nil))
                    : .failure(.notFound)
            }
            if node.kind == .symbolicLink && (!isLast || followLast) {
                hops += 1
                guard hops <= 40 else { return .failure(.symbolicLinkLoop) }
                switch locate(node.target, from: current, followLast: true, hops: &hops) {
                case .failure(let error): return .failure(error)
                case .success(let resolved):
                    if isLast { return .success(resolved) }
                    guard let inode = resolved.inode else { return .failure(.notFound) }
                    current = inode
                }
                continue
            }
            if isLast { return .success(SimulatedDisk.Location(parent: current, name: component, inode: child)) }
            current = child
        }
        return .failure(.notFound)  // not reached: the last component returns
    }

    /// Makes a new node and names it `name` in `parent`, as a namespace change of `parent`.
    mutating func create(
        _ kind: FileStatus.Kind, named name: String, in parent: UInt64, permissions: UInt32, owner: UInt32
    ) -> SimulatedDisk.Node {
        let node = SimulatedDisk.Node(inode: nextInode, kind: kind, permissions: permissions, owner: owner)
        nextInode += 1
        node.parent = parent
        nodes[node.inode] = node
        link(node.inode, as: name, in: parent)
        return node
    }

    mutating func link(_ inode: UInt64, as name: String, in parent: UInt64) {
        guard let directory = nodes[parent] else { return }
        directory.entries[name] = inode
        directory.pendingNamespace.append(.link(name: name, inode: inode))
    }
}
