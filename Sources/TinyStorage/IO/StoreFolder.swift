#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A store's folder, opened without following a link, and the only way the engine reaches the
/// files in it.
///
/// Whoever can write into a folder chooses what its names point to. So every file the store opens
/// or creates is opened relative to this folder's descriptor with `O_NOFOLLOW`, and must be a
/// regular file with one name, owned by this process's user; anything else planted at one of the
/// store's names (a symbolic link, a hard link to a file elsewhere, a FIFO, a socket, a directory,
/// another user's file) makes the store unavailable with ``TinyStorageError/Code/unsafeFile``, and
/// nothing outside the folder is created, read or changed. Temporary files get names no one can
/// predict and are created with `O_EXCL`.
///
/// The folder itself must be a directory owned by this process's user that no one else can write
/// to, or one with the sticky bit (where others cannot remove or rename the store's files): in a
/// folder others can write to, they could delete the data file and the store would look empty.
/// This is the rule OpenSSH applies to `~/.ssh` (`StrictModes`) and git to repositories
/// (`safe.directory`). App and App Group containers belong to the app's user and pass it.
///
/// The folder and every file the store opens in it carry no data protection (Apple's devices:
/// `FileProtectionType.none`), so the store can be read before the first unlock after a restart,
/// when apps and widgets are launched: a class found on the folder, or on a file before it is
/// opened, is removed and noted in ``removals`` (a folder the app made, a file an older version
/// created or one copied in). Files created here take the folder's class, none.
final class StoreFolder: Sendable {
    let directory: FileIO.Directory
    let io: FileIO
    /// Where this folder, and the folders opened from it, note each item whose data protection
    /// they removed: the engine logs them (see `Engine.noteProtectionRemovals`).
    let removals: Locked<[ProtectionRemoval]>
    /// The user that must own the folder and its files: this process's effective user when the
    /// folder was opened (`geteuid(2)`, asked once, not for every file).
    let user: UInt32
    /// Opened for a read-only store (``Engine/Options/readOnly``): the folder and its files may
    /// belong to another user (the one whose process writes the store), and nothing in it is
    /// changed, not even a data protection class. The other rules hold.
    let readOnly: Bool
    /// The read permission the files and folders created here give others besides the owner
    /// (``TinyStorage/Readers``): `0`, owner-only (the default), or group (`0o040`) or everyone's
    /// (`0o044`) read bits. Never a write bit.
    let sharedReading: mode_t

    var path: String { directory.path }
    /// The mode of a file created here.
    var fileMode: mode_t { 0o600 | sharedReading }
    /// The mode of a folder created here: a file's, with search permission where it may be read.
    var folderMode: mode_t { 0o700 | sharedReading | (sharedReading >> 2) }

    private init(
        directory: FileIO.Directory, io: FileIO, user: UInt32, readOnly: Bool, sharedReading: mode_t,
        removals: Locked<[ProtectionRemoval]>
    ) {
        self.directory = directory
        self.io = io
        self.user = user
        self.readOnly = readOnly
        self.sharedReading = sharedReading
        self.removals = removals
    }

    deinit { io.close(directory.fd) }

    /// Opens `parentPath/name` as a store folder.
    ///
    /// - Parameters:
    ///   - create: Create the folder (owner-only, no data protection) and any missing parents
    ///     when they do not exist. Parents keep the class their own parent gives them: they are
    ///     the app's folders, and may hold its other files.
    ///   - readOnly: Open it for a read-only store: another user may own it (its files must be
    ///     that user's), nothing is changed.
    ///   - sharedReading: The read bits for group or others of the folder and files it creates.
    ///   - removals: Where to note the data protection removed from the folder and its files.
    /// - Returns: `nil` when the folder does not exist and `create` is `false`.
    /// - Throws: `.unsafeFile` when something else than a private directory of this user is there,
    ///   or the system error (`.permissionDenied`, `.io`…).
    static func open(
        parentPath: String, name: String, io: FileIO, create: Bool, readOnly: Bool = false, sharedReading: mode_t = 0,
        removals: Locked<[ProtectionRemoval]> = Locked([])
    ) throws(TinyStorageError) -> StoreFolder? {
        var parent: FileIO.Directory
        switch io.openDirectory(atPath: parentPath) {
        case .success(let value): parent = value
        case .failure(.notFound) where create:
            if case .failure(let error) = io.makeDirectories(atPath: parentPath) {
                throw .system(error, "create the directory that holds the store", path: parentPath)
            }
            do throws(Errno) {
                parent = try io.openDirectory(atPath: parentPath).get()
            } catch {
                throw .system(error, "open", path: parentPath)
            }
        case .failure(.notFound): return nil
        case .failure(let error): throw .system(error, "open the directory that holds the store", path: parentPath)
        }
        defer { io.close(parent.fd) }
        return try openSubfolder(
            of: parent, name, io: io, create: create, readOnly: readOnly, sharedReading: sharedReading,
            removals: removals)
    }

    /// Opens (and with `create`, makes) the folder `name` in this one, with the same rules; what it
    /// creates is owner-only (`quarantine/` holds damaged bytes, shared with no one).
    func subfolder(_ name: String, create: Bool) throws(TinyStorageError) -> StoreFolder? {
        try Self.openSubfolder(
            of: directory, name, io: io, create: create, readOnly: readOnly, sharedReading: 0, removals: removals)
    }

    private static func openSubfolder(
        of parent: FileIO.Directory, _ name: String, io: FileIO, create: Bool, readOnly: Bool, sharedReading: mode_t,
        removals: Locked<[ProtectionRemoval]>
    ) throws(TinyStorageError) -> StoreFolder? {
        let path = parent.path(of: name)
        // NB: read once for every check made in this folder, the folder's own included.
        let user = io.fileSystem.effectiveUserID
        var expected: FileStatus
        // NB: looked at first, created only when missing: an existing folder (every open but the
        // first) costs no `mkdirat`.
        switch io.status(in: parent, name) {
        case .success(let status): expected = status
        case .failure(.notFound) where create:
            switch io.makeDirectory(in: parent, name, mode: 0o700 | sharedReading | (sharedReading >> 2)) {
            case .success:
                // NB: until its parent is flushed, a power loss can take the new folder and
                // every file flushed inside it.
                if case .failure(let error) = io.syncNames(inDirectoryAt: parent.path) {
                    throw .system(error, "flush the directory that holds", path: path)
                }
            case .failure(.exists): break  // made meanwhile by another process
            case .failure(let error): throw .system(error, "create the directory", path: path)
            }
            switch io.status(in: parent, name) {
            case .success(let status): expected = status
            case .failure(.notFound): return nil
            case .failure(let error): throw .system(error, "inspect", path: path)
            }
        case .failure(.notFound): return nil
        case .failure(let error): throw .system(error, "inspect", path: path)
        }
        try checkFolder(expected, at: path, user: user, readOnly: readOnly)
        let fd: Int32
        switch io.open(in: parent, name, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW) {
        case .success(let value): fd = value
        case .failure(.symbolicLinkLoop), .failure(.notDirectory):
            throw unsafe(path, "was replaced by something that is not a directory while it was being opened")
        case .failure(let error): throw .system(error, "open the directory", path: path)
        }
        let directory = FileIO.Directory(fd: fd, path: path)
        // NB: read-only, the folder's owner (who may be another user) must own its files.
        let folder = StoreFolder(
            directory: directory, io: io, user: readOnly ? expected.owner : user, readOnly: readOnly,
            sharedReading: sharedReading, removals: removals)
        switch io.status(fd) {
        case .success(let status) where status.isSameFile(as: expected): expected = status
        case .success: throw unsafe(path, "was replaced by another directory while it was being opened")
        case .failure(let error): throw .system(error, "inspect", path: path)
        }
        try checkFolder(expected, at: path, user: user, readOnly: readOnly)
        // NB: once the path is known to lead to this folder, and before any file is created in
        // it, so every file the store creates is readable before first unlock. Best effort: a
        // folder that keeps its class only makes new files protected, which the next open fixes.
        _ = folder.removeDataProtection(ofItemAt: path)
        return folder
    }

    /// A store folder must be a directory, owned by this process's user (by anyone, `readOnly`),
    /// that only its owner can write to — or one with the sticky bit, where others cannot remove
    /// or rename its files.
    private static func checkFolder(
        _ status: FileStatus, at path: String, user: UInt32, readOnly: Bool
    ) throws(TinyStorageError) {
        guard status.kind == .directory else {
            throw unsafe(path, "is \(status.kind.rawValue), where the store expects its own directory")
        }
        guard status.owner == user || readOnly else {
            throw unsafe(
                path,
                "is owned by user \(status.owner), not by this process's user (\(user)). Run as that user, "
                    + "or give the directory to this one")
        }
        let writableByOthers = status.permissions & 0o022 != 0
        let sticky = status.permissions & 0o1000 != 0
        guard !writableByOthers || sticky else {
            throw unsafe(
                path,
                "can be written by other users (mode \(String(status.permissions, radix: 8))), who could "
                    + "replace or remove the store's files. Make it private (chmod go-w) or set the sticky bit")
        }
    }

    // MARK: Files

    /// How ``openFile(_:writable:create:)`` treats a missing file.
    enum Creation {
        /// A missing file is not an error: the call returns `nil`.
        case never
        /// A missing file is created (owner-only, `O_EXCL`, no data protection).
        case ifMissing
    }

    /// Opens the store's file `name` in this folder.
    ///
    /// `fstatat(2)` first (so a FIFO or device is never opened), then its data protection class
    /// removed when it has one, then `openat(2)` with `O_NOFOLLOW | O_NONBLOCK`, then `fstat(2)`
    /// to check that the descriptor is the regular file that was inspected, with one name, owned
    /// by this process's user.
    ///
    /// - Returns: the descriptor, or `nil` when the file does not exist and `creation` is `.never`.
    /// - Throws: `.unsafeFile` for anything that is not one of the store's own files;
    ///   `.permissionDenied` saying so for a file whose class could not be removed and that the
    ///   system does not open (the device is locked); or the system error.
    func openFile(_ name: String, writable: Bool, creation: Creation) throws(TinyStorageError) -> Int32? {
        try openFileWithStatus(name, writable: writable, creation: creation)?.fd
    }

    /// Opens the store's file `name` in this folder as ``openFile(_:writable:creation:)`` does,
    /// and hands over what `fstat(2)` said of the descriptor, so the caller need not ask again.
    ///
    /// - Returns: the descriptor and its status (`nil` when the file was just created, empty),
    ///   or `nil` when the file does not exist and `creation` is `.never`.
    func openFileWithStatus(
        _ name: String, writable: Bool, creation: Creation
    ) throws(TinyStorageError) -> (fd: Int32, status: FileStatus?)? {
        let path = directory.path(of: name)
        let access = writable ? O_RDWR : O_RDONLY
        for _ in 0..<32 {
            switch io.status(in: directory, name) {
            case .success(let status):
                try checkFile(status, at: path)
                // NB: before the open, which a protected file fails while the device is locked.
                let kept = removeDataProtection(ofItemAt: path)
                let fd: Int32
                switch io.open(in: directory, name, flags: access | O_NOFOLLOW | O_NONBLOCK) {
                case .success(let value): fd = value
                case .failure(.notFound): continue  // removed meanwhile: look again
                case .failure(.symbolicLinkLoop), .failure(.isDirectory), .failure(.noSuchDeviceOrAddress):
                    throw Self.unsafe(
                        path, "was replaced by something that is not a regular file while it was being opened")
                case .failure(let error):
                    if error == .notPermitted, let kept { throw Self.closedByDataProtection(path, kept) }
                    throw .system(error, "open", path: path)
                }
                do throws(TinyStorageError) {
                    switch io.status(fd) {
                    case .success(let opened) where opened.isSameFile(as: status) && opened.linkCount == 0:
                        // NB: removed, or replaced by a rename (a compaction), since it was
                        // inspected: an ordinary race, not a planted file. Look again.
                        io.close(fd)
                        continue
                    case .success(let opened) where opened.isSameFile(as: status):
                        try checkFile(opened, at: path)
                        return (fd, opened)
                    case .success:
                        // Replaced between the look and the open: look again, and judge what is there now.
                        io.close(fd)
                        continue
                    case .failure(let error): throw .system(error, "inspect", path: path)
                    }
                } catch {
                    io.close(fd)
                    throw error
                }
            case .failure(.notFound):
                guard creation == .ifMissing else { return nil }
                switch io.open(
                    in: directory, name, flags: access | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK, mode: fileMode)
                {
                case .success(let fd): return (fd, nil)
                case .failure(.exists): continue  // another process created it: open that one
                case .failure(let error): throw .system(error, "create", path: path)
                }
            case .failure(let error):
                throw .system(error, "inspect", path: path)
            }
        }
        throw Self.unsafe(path, "keeps appearing and disappearing while the store opens it")
    }

    /// What is at `name` in this folder, when it is one of the store's own files; `nil` when
    /// nothing is there.
    ///
    /// - Throws: `.unsafeFile` when something else is there, or the system error.
    func fileStatus(_ name: String) throws(TinyStorageError) -> FileStatus? {
        let path = directory.path(of: name)
        switch io.status(in: directory, name) {
        case .success(let status):
            try checkFile(status, at: path)
            return status
        case .failure(.notFound): return nil
        case .failure(let error): throw .system(error, "inspect", path: path)
        }
    }

    /// Creates a new, empty file for `purpose` under a name no one can predict
    /// (`O_CREAT | O_EXCL | O_NOFOLLOW`), such as `.store.tinystorage.4711-9f2c….tmp`, and takes
    /// an exclusive `flock(2)` on it before writing anything: it says the file is being written,
    /// for as long as the descriptor is open (see ``removeAbandonedTemporaryFiles()``). Keep the
    /// descriptor open until the file is renamed into place or removed.
    /// Its mode is ``fileMode`` (the process's umask applies).
    func createTemporaryFile(
        for purpose: String
    ) throws(TinyStorageError) -> (name: String, fd: Int32) {
        for _ in 0..<8 {
            let name = Self.temporaryName(for: purpose)
            switch io.open(in: directory, name, flags: O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, mode: fileMode) {
            case .success(let fd):
                // NB: best effort: where `flock` does not work, the name's process ID tells instead.
                _ = io.lock(fd, .exclusive, waiting: false)
                return (name, fd)
            case .failure(.exists): continue
            case .failure(let error): throw .system(error, "create a temporary file in", path: path)
            }
        }
        throw TinyStorageError(.io, "Could not find an unused temporary file name in '\(path)'.")
    }

    /// Creates a new file named `name` that must not exist yet (`O_CREAT | O_EXCL | O_NOFOLLOW`).
    ///
    /// - Returns: `nil` when the name is taken.
    func createNewFile(_ name: String) throws(TinyStorageError) -> Int32? {
        switch io.open(in: directory, name, flags: O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600) {
        case .success(let fd): return fd
        case .failure(.exists): return nil
        case .failure(let error): throw .system(error, "create", path: directory.path(of: name))
        }
    }

    /// Removes temporary files that processes which are gone left behind (a compaction's or a
    /// repair's new file, a quarantine copy, after a crash or `kill -9`): their names only.
    ///
    /// One of this user's own files there is abandoned when nobody holds the `flock(2)` its
    /// writer takes right after creating it (the kernel lets go of it with the process, so a
    /// process ID used again by another process changes nothing) and it is not empty: an empty
    /// one may be a live writer's between its creation and its lock, so it goes only once its
    /// process is gone. Anything else at such a name (planted: a link, another user's file), and
    /// everything where `flock` does not work, goes only when the process its name names is gone.
    ///
    /// - Returns: How many temporary files are left (being written, or not known to be
    ///   abandoned); 0 when the folder could not be listed.
    @discardableResult
    func removeAbandonedTemporaryFiles() -> Int {
        guard case .success(let names) = io.entries(of: directory) else { return 0 }
        var left = 0
        for name in names {
            guard let pid = Self.owningProcess(ofTemporary: name) else { continue }
            if isAbandoned(name, writtenBy: pid), case .success = io.unlink(in: directory, name) { continue }
            left += 1
        }
        return left
    }

    /// Whether the temporary file `name`, created by process `pid`, has no live writer.
    private func isAbandoned(_ name: String, writtenBy pid: pid_t) -> Bool {
        guard case .success(let status) = io.status(in: directory, name) else { return false }
        guard status.isRegularFile, status.owner == user, status.linkCount == 1,
            case .success(let fd) = io.open(in: directory, name, flags: O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
        else { return !Self.isRunning(pid) }
        defer { io.close(fd) }
        switch io.lock(fd, .exclusive, waiting: false) {
        case .success:
            guard case .success(let opened) = io.status(fd), opened.isSameFile(as: status) else { return false }
            return opened.size > 0 || !Self.isRunning(pid)
        case .failure(.wouldBlock):
            return false
        case .failure:
            return !Self.isRunning(pid)
        }
    }

    /// Renames `source` over `destination` inside this folder (`renameat(2)`).
    func rename(_ source: String, to destination: String) -> Result<Void, Errno> {
        io.rename(in: directory, source, to: destination)
    }

    /// Renames `source` to `destination` unless `destination` exists (`EEXIST`). File systems
    /// that cannot do that atomically (`EINVAL`, `ENOTSUP`, `ENOSYS`) get a check, then a rename:
    /// callers that race other processes take the cross-process lock around it then.
    func renameWithoutReplacing(_ source: String, to destination: String) -> Result<Void, Errno> {
        switch io.renameWithoutReplacing(in: directory, source, to: destination) {
        case .failure(Errno(EINVAL)), .failure(.notSupported), .failure(Errno(ENOSYS)):
            if case .success = io.status(in: directory, destination) { return .failure(.exists) }
            return io.rename(in: directory, source, to: destination)
        case let other: return other
        }
    }

    /// Removes `name` from this folder (`unlinkat(2)`); a missing name is not an error.
    func remove(_ name: String) -> Result<Void, Errno> {
        io.unlink(in: directory, name)
    }

    /// Flushes the folder, so names created, renamed or removed in it are durable.
    func sync() -> Result<Void, Errno> {
        io.syncDirectory(directory)
    }

    /// The full path of `name` in this folder, for messages and reports.
    func path(of name: String) -> String { directory.path(of: name) }

    // MARK: Data protection

    /// Gives the item at `path` (this folder, or one of its files) no data protection when it
    /// has some, and notes that in ``removals``.
    ///
    /// - Returns: The class the item keeps, when it has one that could not be removed (a
    ///   protected file while the device is locked, `EPERM`); `nil` when it has none now, or its
    ///   class could not be read (opening it then tells what is wrong).
    private func removeDataProtection(ofItemAt path: String) -> ProtectionClass? {
        guard case .success(let current) = io.protectionClass(ofItemAt: path), current != .none else { return nil }
        if readOnly { return current }  // changes nothing: the item keeps its class
        guard case .success = io.removeDataProtection(ofItemAt: path) else { return current }
        removals.withLock { $0.append(ProtectionRemoval(path: path, previous: current)) }
        return nil
    }

    /// The error for a file the system would not open (`EPERM`) while it keeps `protection`.
    static func closedByDataProtection(_ path: String, _ protection: ProtectionClass) -> TinyStorageError {
        TinyStorageError(
            .permissionDenied,
            "'\(path)' has data protection (\(protection)), which keeps it closed while the device is locked, as "
                + "it is after a restart until the user first unlocks it; nothing was read from or written to it. "
                + "TinyStorage removes the protection the first time it opens the store on an unlocked device, and "
                + "answers nothing until then. If this happens on an unlocked device, something else gives the "
                + "store's files a protection class: give them FileProtectionType.none.",
            underlying: Errno.notPermitted)
    }

    // MARK: Rules

    private func checkFile(_ status: FileStatus, at path: String) throws(TinyStorageError) {
        guard status.kind == .regular else {
            throw Self.unsafe(path, "is \(status.kind.rawValue), where the store expects its own regular file")
        }
        guard status.linkCount == 1 else {
            throw Self.unsafe(
                path,
                "has \(status.linkCount) names (hard links), so it may be another file's contents; the store "
                    + "only uses files that exist in its folder alone")
        }
        guard status.owner == user else {
            let owner = readOnly ? "the store folder's owner" : "this process's user"
            throw Self.unsafe(path, "is owned by user \(status.owner), not by \(owner) (\(user))")
        }
    }

    static func unsafe(_ path: String, _ problem: String) -> TinyStorageError {
        TinyStorageError(
            .unsafeFile,
            "'\(path)' \(problem). TinyStorage never follows links or uses files it does not own; "
                + "nothing was read from or written to it.")
    }

    static let temporarySuffix = ".tmp"

    /// `.<purpose>.<pid>-<16 random hex digits>.tmp`.
    static func temporaryName(for purpose: String) -> String {
        let random = UInt64.random(in: .min ... .max)
        let hex = String(random, radix: 16)
        return ".\(purpose).\(getpid())-\(String(repeating: "0", count: 16 - hex.count) + hex)\(temporarySuffix)"
    }

    /// The process that created a temporary file, read from its name; `nil` for other names.
    static func owningProcess(ofTemporary name: String) -> pid_t? {
        guard name.hasPrefix("."), name.hasSuffix(temporarySuffix) else { return nil }
        let stem = name.dropLast(temporarySuffix.count)
        guard let dot = stem.lastIndex(of: "."), let dash = stem[dot...].firstIndex(of: "-") else { return nil }
        return pid_t(stem[stem.index(after: dot)..<dash])
    }

    /// Whether a process `pid` exists (`kill(pid, 0)`): `EPERM` means it does, as another user's.
    private static func isRunning(_ pid: pid_t) -> Bool {
        kill(pid, 0) == 0 || errno != ESRCH
    }
}
