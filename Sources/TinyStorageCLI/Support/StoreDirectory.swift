// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import Foundation
import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The store directory named on the command line, and the checks made before touching it.
///
/// `TinyStorage(insideDirectory:name:)` creates whatever is missing, so nothing here opens a
/// store until the path is known to be one (or, for `write` and `import`, allowed to become one).
/// Commands that only read never open it at all: they use ``inspection()``, which changes nothing.
struct StoreDirectory {
    /// The data file every store directory holds.
    static let dataFileName = "store.tinystorage"
    /// The file the original TinyStorage library kept its values in.
    static let originalFileName = "tiny-storage.plist"

    /// The path as the user typed it; messages quote it this way.
    let path: String
    /// The absolute, standardized location.
    let url: URL

    init(_ path: String) {
        self.path = path
        url = URL(fileURLWithPath: path, isDirectory: true).standardizedFileURL
    }

    var dataFileURL: URL { url.appendingPathComponent(Self.dataFileName, isDirectory: false) }

    /// What is at the path, without changing anything.
    enum State: Equatable {
        /// A directory holding something at the data file's name, of this many bytes (`-1`:
        /// unknown). Whether it is a file the store may use — not a link, a FIFO, another user's
        /// file — is the library's to decide, when it opens or inspects it.
        case store(dataFileSize: Int)
        /// Nothing is there; `parentExists` says whether the store could be created.
        case missing(parentExists: Bool)
        /// Something other than a directory is there.
        case notADirectory
        /// A directory without a data file; `isEmpty` when it holds nothing at all.
        case directoryWithoutStore(isEmpty: Bool)
        /// A store of the original TinyStorage library (`tiny-storage.plist`) that no program has
        /// opened with this TinyStorage yet: the first one to open it adopts it.
        case original
        /// What is at the path cannot be looked at: this user may not search `blocked`, a folder
        /// on the way (or the store folder itself), so whether a store is there cannot be told.
        case unreachable(blocked: String, errno: Int32)
    }

    func currentState() -> State {
        // NB: `lstat` follows no symbolic link at the path itself. A link at the store folder's
        // name or at the data file's name is something the library refuses to use (`unsafeFile`)
        // rather than "nothing there": it is handed to the library, which says so, never taken
        // for a missing or empty store. A path this user may not look at is neither: it is
        // unreachable, never "does not exist".
        let folder: FileStatus
        switch Self.status(atPath: url.path) {
        case .missing:
            var parentIsDirectory: ObjCBool = false
            let parent = url.deletingLastPathComponent().path
            let parentExists = FileManager.default.fileExists(atPath: parent, isDirectory: &parentIsDirectory)
            return .missing(parentExists: parentExists && parentIsDirectory.boolValue)
        case .failed(let code):
            return .unreachable(
                blocked: Self.firstUnsearchableFolder(on: url) ?? url.deletingLastPathComponent().path, errno: code)
        case .found(let status):
            folder = status
        }
        if folder.isSymbolicLink { return .store(dataFileSize: -1) }
        guard folder.isDirectory else { return .notADirectory }
        switch Self.status(atPath: dataFileURL.path) {
        case .found(let status): return .store(dataFileSize: status.size)
        case .failed(let code): return .unreachable(blocked: url.path, errno: code)
        case .missing: break
        }
        guard let contents = try? FileManager.default.contentsOfDirectory(atPath: url.path) else {
            return .unreachable(blocked: url.path, errno: EACCES)
        }
        if contents.contains(Self.originalFileName) { return .original }
        return .directoryWithoutStore(isEmpty: contents.isEmpty)
    }

    // MARK: Writing

    /// Opens the store for a write.
    ///
    /// - Parameter mayCreate: Whether a new store may be made: in a directory that does not exist
    ///   yet but whose parent does, or in an existing empty directory. Never inside a non-empty
    ///   directory that is not a store, so a mistyped path cannot litter an unrelated folder.
    /// - Throws: `.notAStore`, `.unavailable`.
    func openForWriting(mayCreate: Bool) throws(CLIError) -> TinyStorage {
        let state = currentState()
        switch state {
        case .store: break
        case .unreachable:
            throw notAStore(state)
        case .original:
            // NB: opening adopts the original file in one commit and leaves it in place.
            let storage = try open(from: state)
            if case .store = currentState() {
                Console.note(
                    "adopted the original TinyStorage file \(Self.originalFileName) into the store '\(path)'; "
                        + "the original file was left in place.",
                    prefix: "note")
            }
            return storage
        case .missing(parentExists: true), .directoryWithoutStore(isEmpty: true):
            guard mayCreate else { throw notAStore(state) }
            guard isUsableName else { throw notAStore(state) }
        case .missing(parentExists: false):
            guard mayCreate else { throw notAStore(state) }
            throw CLIError(
                .notAStore,
                "cannot create a store at '\(path)': its parent directory "
                    + "'\(url.deletingLastPathComponent().path)' does not exist. Create it first "
                    + "(mkdir -p) or check the path.")
        case .notADirectory, .directoryWithoutStore(isEmpty: false):
            throw notAStore(state)
        }
        return try open(from: state)
    }

    /// Opens an existing store read-only (`watch`): creates and changes nothing, and works for a
    /// user who may read the store but not write it.
    ///
    /// - Throws: `.notAStore`, `.unavailable`.
    func openForReading() throws(CLIError) -> TinyStorage {
        let state = currentState()
        guard case .store = state else { throw notAStore(state) }
        return try open(from: state, access: .readOnly)
    }

    /// Translates a failed write into the tool's exit codes.
    func writeFailure(_ error: TinyStorageError) -> CLIError {
        switch error.code {
        case .unavailable, .corrupted, .unsupportedFormat:
            unavailable(error)
        case .invalidKey, .encodingFailed, .valueTooLarge:
            CLIError(.invalidInput, "\(error.message)\(keySuffix(error))")
        default:
            CLIError(
                .writeFailed,
                "writing to the store '\(path)' failed (\(error.code)): \(error.message)\(causeSuffix(error))")
        }
    }

    // MARK: Internals

    /// Opens the store, found in `state`, and makes sure it could be read.
    private func open(from state: State, access: TinyStorage.Access = .readWrite) throws(CLIError) -> TinyStorage {
        // NB: `.immediate` because the process exits right after the command: a `.standard`
        // commit would never get its background flush, and a `write` that returned should
        // survive a power cut. Changes are announced on a queue of their own: this process's
        // main thread runs the command, never the main queue.
        let storage = TinyStorage(
            insideDirectory: url.deletingLastPathComponent(), name: url.lastPathComponent,
            durability: .immediate, access: access, notificationQueue: DispatchQueue(label: "tinystorage.changes"),
            logger: ConsoleLogger())
        if case .unavailable(let error) = storage.availability { throw openingFailure(error, from: state) }
        // NB: opening ran crash recovery; say what it set aside, once, before the command's output.
        for report in storage.recoveryReports {
            Console.note("the store '\(path)': \(report.description)", prefix: "warning")
        }
        return storage
    }

    /// Why opening the store found in `state` failed, in the tool's exit codes: a permission the
    /// store needs for writing (its lock file, a new folder) is a failed write (6) when this user
    /// may read the store, or when there was no store yet; anything else is the store being
    /// unreadable (4) or unsafe (9).
    private func openingFailure(_ error: TinyStorageError, from state: State) -> CLIError {
        let reason = (error.underlying as? TinyStorageError) ?? error
        guard reason.code == .permissionDenied else { return unavailable(error) }
        switch state {
        case .missing, .directoryWithoutStore:
            return CLIError(
                .writeFailed,
                "cannot create a store at '\(path)' (permissionDenied): \(reason.message)\(causeSuffix(reason)) "
                    + "Nothing was written.")
        case .store, .original:
            guard (try? TinyStorage.inspect(storeDirectory: url)) != nil || state == .original else {
                return unavailable(error)
            }
            return CLIError(
                .writeFailed,
                "this user may read the store '\(path)' but not change it (permissionDenied): "
                    + "\(reason.message)\(causeSuffix(reason)) Nothing was written.")
        case .notADirectory, .unreachable:
            return unavailable(error)
        }
    }

    /// Whether the last path component is a name the library accepts for a store.
    private var isUsableName: Bool {
        let name = url.lastPathComponent
        return !name.isEmpty && name != "/" && name != "." && name != ".." && name.utf8.count <= 255
    }

    func notAStore(_ state: State) -> CLIError {
        let what = "'\(path)' is not a TinyStorage store"
        let pointAtDirectory = "Pass the store's directory, the one that holds \(Self.dataFileName)."
        switch state {
        case .store:
            return CLIError(.notAStore, "\(what).")
        case .original:
            return CLIError(
                .notAStore,
                "'\(path)' holds an original TinyStorage store (\(Self.originalFileName)) that has not been adopted yet; "
                    + "any program that opens it with this TinyStorage, such as `tinystorage compact`, adopts it.")
        case .missing:
            return CLIError(
                .notAStore,
                "\(what) (it does not exist). Check the path; `tinystorage write` creates a new store.")
        case .unreachable(let blocked, let code):
            return CLIError(
                .unavailable,
                "the store '\(path)' cannot be read (permissionDenied): this user may not look inside '\(blocked)' "
                    + "(\(String(cString: strerror(code)))), so whether a store is there cannot be told. Check its "
                    + "owner and permissions (ls -ld '\(blocked)'). Nothing was changed.")
        case .notADirectory:
            if url.lastPathComponent == Self.dataFileName {
                return CLIError(
                    .notAStore,
                    "\(what) (it is the data file, not the store directory). Pass its directory: "
                        + "'\(url.deletingLastPathComponent().path)'.")
            }
            return CLIError(.notAStore, "\(what) (it is a file, not a directory). \(pointAtDirectory)")
        case .directoryWithoutStore(let isEmpty):
            let advice =
                isEmpty
                ? pointAtDirectory
                : "\(pointAtDirectory) `write` and `import` create a store only in a new or empty directory."
            return CLIError(.notAStore, "\(what) (no \(Self.dataFileName) inside). \(advice)")
        }
    }

    func unavailable(_ error: TinyStorageError) -> CLIError {
        // NB: the library wraps the reason in an `.unavailable` error whose message repeats the
        // path; the cause alone reads better after our own prefix.
        let reason = (error.underlying as? TinyStorageError) ?? error
        if reason.code == .unsafeFile {
            return CLIError(
                .unsafe,
                "the store '\(path)' is not safe to use: \(reason.message)")
        }
        return CLIError(
            .unavailable,
            "the store '\(path)' cannot be read (\(reason.code)): \(reason.message)\(causeSuffix(reason))")
    }

    private func keySuffix(_ error: TinyStorageError) -> String {
        guard let key = error.key else { return "" }
        return " [key: \(key)]"
    }

    private func causeSuffix(_ error: TinyStorageError) -> String {
        guard let underlying = error.underlying, !(underlying is TinyStorageError) else { return "" }
        return " (\(underlying))"
    }
}

extension StoreDirectory {
    /// What `lstat(2)` says about a path.
    enum PathStatus {
        case found(FileStatus)
        /// Nothing is there (`ENOENT`, `ENOTDIR`).
        case missing
        /// It could not be looked at: the `errno`, usually `EACCES`.
        case failed(Int32)
    }

    struct FileStatus {
        var isDirectory: Bool
        var isSymbolicLink: Bool
        /// The size in bytes.
        var size: Int
    }

    /// What is at `path` itself (a link is not followed). See: man 2 lstat
    static func status(atPath path: String) -> PathStatus {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            let code = errno
            return code == ENOENT || code == ENOTDIR ? .missing : .failed(code)
        }
        let type = info.st_mode & S_IFMT
        return .found(
            FileStatus(isDirectory: type == S_IFDIR, isSymbolicLink: type == S_IFLNK, size: Int(info.st_size)))
    }

    /// The first folder from the root down to `url`'s parent that this user may not search
    /// (`access(2)` with `X_OK`), or `nil` when there is none.
    static func firstUnsearchableFolder(on url: URL) -> String? {
        var folder = "/"
        for component in url.deletingLastPathComponent().pathComponents.dropFirst() {
            folder = (folder as NSString).appendingPathComponent(component)
            if access(folder, X_OK) != 0 { return folder }
        }
        return nil
    }
}

#endif
