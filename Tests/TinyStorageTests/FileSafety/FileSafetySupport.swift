import Foundation
import Testing

@testable import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One test's files for issue 14: a store folder, and beside it the files someone would like the
/// store to overwrite, create or read.
///
/// ```text
/// root/outside/foreign.tinystorage   another store's data file (holds the key "stolen")
/// root/outside/tiny-storage.plist    an original TinyStorage file (holds the key "stolen")
/// root/outside/empty                 an existing, empty file
/// root/outside/folder/inside.txt     a directory with a file in it
/// root/outside/not-yet               a name that does not exist (and must not afterwards)
/// root/stores/                       the `insideDirectory` of the store
/// root/stores/store/                 the store folder
/// ```
struct FileSafetySandbox {
    let root: URL
    /// The file system the sandbox's stores use: it records every file they read.
    let reads = ReadRecordingFileSystem()

    var outside: URL { root.appendingPathComponent("outside", isDirectory: true) }
    var stores: URL { root.appendingPathComponent("stores", isDirectory: true) }
    var folder: URL { stores.appendingPathComponent("store", isDirectory: true) }

    var foreignDataFile: URL { outside.appendingPathComponent("foreign.tinystorage") }
    var foreignOriginalFile: URL { outside.appendingPathComponent("tiny-storage.plist") }
    var emptyFile: URL { outside.appendingPathComponent("empty") }
    var directory: URL { outside.appendingPathComponent("folder", isDirectory: true) }
    var missingName: URL { outside.appendingPathComponent("not-yet") }

    /// The key the outside files hold: a store that ever shows it read a file it does not own.
    static let foreignKey = "stolen"

    /// Creates the outside files and the (empty) `stores/` folder in `root`.
    init(root: URL) throws {
        self.root = root
        let manager = FileManager.default
        try manager.createDirectory(at: directory, withIntermediateDirectories: true)
        try manager.createDirectory(at: stores, withIntermediateDirectories: true)
        try Data("someone else's file\n".utf8).write(to: directory.appendingPathComponent("inside.txt"))
        try Data().write(to: emptyFile)
        let secret = Data(#""someone else's secret""#.utf8)
        var bytes = LogHeader(generation: 1).encoded()
        LogCommit(operations: [.put(key: Self.foreignKey, value: secret)]).encode(into: &bytes)
        try Data(bytes).write(to: foreignDataFile)
        try PropertyListSerialization.data(fromPropertyList: [Self.foreignKey: secret], format: .binary, options: 0)
            .write(to: foreignOriginalFile)
    }

    /// Everything below `root` except the store folder: what no store operation may change.
    func outsideSnapshot() throws -> FileTreeSnapshot {
        try FileTreeSnapshot(root, excluding: ["stores/store"])
    }

    /// Opens the store in this sandbox with a quiet logger.
    func openStore(logger: TestLogger = TestLogger()) -> TinyStorage {
        TinyStorageTests.openStore(stores, io: FileIO(fileSystem: reads), logger: logger)
    }

    /// Expects no store of this sandbox to have read or mapped a file below `outside`, through
    /// whatever name (a hard link planted in its folder shares the file).
    func expectNothingOutsideRead(sourceLocation: SourceLocation = #_sourceLocation) {
        let outsideFiles = ReadRecordingFileSystem.identities(below: outside)
        let read = reads.filesRead.intersection(outsideFiles)
        #expect(read.isEmpty, "read a file outside the store's folder: \(read)", sourceLocation: sourceLocation)
    }

    /// Opens the store and checks that it is unavailable with `unsafeFile` saying `message`, and
    /// refuses every read and write.
    func expectRefusal(saying message: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let storage = openStore()
        let reason = try #require(unavailabilityError(storage), sourceLocation: sourceLocation)
        #expect(reason.code == .unsafeFile, "\(reason)", sourceLocation: sourceLocation)
        #expect(reason.message.contains(message), "\(reason)", sourceLocation: sourceLocation)
        #expect(reason.message.hasSuffix("nothing was read from or written to it."), sourceLocation: sourceLocation)
        expectError(.unavailable, sourceLocation: sourceLocation) {
            try storage.retrieveOrThrow(type: Int.self, forKey: "streak")
        }
        #expect(storage.retrieve(type: Int.self, forKey: "streak") == nil, sourceLocation: sourceLocation)
        expectError(.unavailable, sourceLocation: sourceLocation) { try storage.storeOrThrow(365, forKey: "streak") }
        expectError(.unavailable, sourceLocation: sourceLocation) { try storage.resetOrThrow() }
        expectError(.unavailable, sourceLocation: sourceLocation) { try storage.compactNow() }
    }

    /// Sets the permission bits of the store folder (`chmod(2)`).
    func setFolderMode(_ mode: mode_t) throws {
        try setMode(folder, mode)
    }
}

/// Runs `body` with a fresh ``FileSafetySandbox``, deleted afterwards.
func withFileSafetySandbox<R>(_ body: (FileSafetySandbox) throws -> R) throws -> R {
    try withTemporaryDirectory { root throws in try body(try FileSafetySandbox(root: root)) }
}

/// Every name below a directory, with what a careless writer could change about it: its kind,
/// permissions, owner, modification time, and bytes (or a link's destination). Link counts and
/// access times are left out: planting a hard link changes the first, reading the second.
struct FileTreeSnapshot: Equatable, CustomStringConvertible {
    struct Entry: Equatable {
        var mode: UInt32
        var owner: UInt32
        var modified: [Int]
        var contents: Data?
        var destination: String?
    }

    var entries: [String: Entry] = [:]

    /// - Parameter excluded: Paths relative to `directory` whose subtrees are left out.
    init(_ directory: URL, excluding excluded: Set<String> = []) throws {
        // NB: a store written before the snapshot may still have pages of its data file queued
        // to be faulted in (see `AppendMapping.prepare(ahead:)`), which changes no byte but moves
        // the file's modification time, as any write through a mapping does: that comes first.
        AppendMapping.waitForPreparedPages()
        for relative in allPaths(below: directory) {
            if excluded.contains(where: { relative == $0 || relative.hasPrefix($0 + "/") }) { continue }
            entries[relative] = try Entry(directory.appendingPathComponent(relative))
        }
    }

    var description: String {
        entries.keys.sorted().map { key in
            let entry = entries[key]
            return "\(key) mode \(String(entry?.mode ?? 0, radix: 8)) uid \(entry?.owner ?? 0) "
                + "\(entry?.contents?.count ?? -1) bytes\(entry?.destination.map { " -> \($0)" } ?? "")"
        }.joined(separator: "\n")
    }
}

extension FileTreeSnapshot.Entry {
    /// What is at `url` itself, without following a link.
    init(_ url: URL) throws {
        let info = try fileInfo(url)
        #if canImport(Darwin)
        let modified = info.st_mtimespec
        #else
        let modified = info.st_mtim
        #endif
        let kind = info.st_mode & S_IFMT
        self.init(
            mode: UInt32(info.st_mode), owner: UInt32(info.st_uid),
            modified: [Int(modified.tv_sec), Int(modified.tv_nsec)],
            contents: kind == S_IFREG ? try Data(contentsOf: url) : nil,
            destination: kind == S_IFLNK ? try FileManager.default.destinationOfSymbolicLink(atPath: url.path) : nil)
    }
}

/// `lstat(2)` of `url`.
func fileInfo(_ url: URL) throws -> stat {
    var info = stat()
    guard lstat(url.path, &info) == 0 else { throw Errno.current }
    return info
}

/// Sets the permission bits of `url` (`chmod(2)`), which may include the sticky bit.
func setMode(_ url: URL, _ mode: mode_t) throws {
    guard chmod(url.path, mode) == 0 else { throw Errno.current }
}

/// Another user, to own what the tests plant: `nobody`, whose ID the refusals name.
enum OtherUser {
    private static let ids = lookUpIDs(user: "nobody", group: "nogroup") ?? lookUpIDs(user: "nobody", group: "nobody")
    static let id: uid_t? = ids?.user
    static let group: gid_t? = ids?.group

    /// Files can be given to another user only by root (`chown(2)`); CI runs the tests as root.
    static var canGiveAway: Bool { getuid() == 0 && id != nil && group != nil }

    /// For tests of what another user planted: skipped, saying why, when files cannot be given away.
    static var isNeeded: ConditionTrait {
        .enabled(if: canGiveAway, "needs root, to give what is planted to another user (nobody)")
    }

    /// Gives `url` itself (not a link's destination) to `nobody` (`lchown(2)`).
    static func giveAway(_ url: URL) throws {
        guard let id, let group else { throw Errno(ENOENT) }
        guard lchown(url.path, id, group) == 0 else { throw Errno.current }
    }
}

/// Creates a Unix domain socket file at `url`: bound at `scratch` (socket paths are limited to
/// about 100 bytes), then renamed into place.
func makeSocket(at url: URL, scratch: URL) throws {
    #if canImport(Darwin)
    let fd = socket(AF_UNIX, SOCK_STREAM, 0)
    #else
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    #endif
    guard fd >= 0 else { throw Errno.current }
    defer { close(fd) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let path = Array(scratch.path.utf8) + [0]
    guard path.count <= MemoryLayout.size(ofValue: address.sun_path) else { throw Errno(ENAMETOOLONG) }
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard bound == 0 else { throw Errno.current }
    guard rename(scratch.path, url.path) == 0 else { throw Errno.current }
}

/// Creates a FIFO (named pipe) at `url` (`mkfifo(3)`).
func makeFIFO(at url: URL) throws {
    guard mkfifo(url.path, 0o600) == 0 else { throw Errno.current }
}

/// Creates a hard link at `url` to the file at `target` (`link(2)`).
func makeHardLink(at url: URL, to target: URL) throws {
    guard link(target.path, url.path) == 0 else { throw Errno.current }
}

/// The IDs of user `user` and group `group`, looked up with the reentrant calls: `getpwnam` and
/// `getgrnam` answer in a buffer every thread shares, which tests running in parallel (and
/// Foundation, naming a file's owner) overwrite, so a user ID read from it could be another's.
func lookUpIDs(user userName: String, group groupName: String) -> (user: uid_t, group: gid_t)? {
    var buffer = [CChar](repeating: 0, count: 16_384)
    var userEntry = passwd()
    var userResult: UnsafeMutablePointer<passwd>?
    guard getpwnam_r(userName, &userEntry, &buffer, buffer.count, &userResult) == 0, userResult != nil else {
        return nil
    }
    let userID = userEntry.pw_uid
    var groupEntry = group()
    var groupResult: UnsafeMutablePointer<group>?
    guard getgrnam_r(groupName, &groupEntry, &buffer, buffer.count, &groupResult) == 0, groupResult != nil else {
        return nil
    }
    return (userID, groupEntry.gr_gid)
}
