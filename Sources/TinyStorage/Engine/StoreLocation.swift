import Foundation

/// Where a store's files live: `insideDirectory/name/`.
///
/// ```text
/// <name>/store.tinystorage     the data file (``TinyStorage/fileURL``)
/// <name>/store.lock            lock file + shared counters (see CoordinationFile)
/// <name>/quarantine/           bytes that failed verification, kept for inspection
/// <name>/tiny-storage.plist    the original TinyStorage's file, if any: imported once, never changed
/// ```
struct StoreLocation: Sendable {
    static let dataFileName = "store.tinystorage"
    static let lockFileName = "store.lock"
    static let quarantineDirectoryName = "quarantine"
    /// The file the original TinyStorage library kept its data in, adopted on first open.
    static let originalFileName = "tiny-storage.plist"
    static let maximumNameLength = 255

    /// The directory the store's folder is in, as the caller gave it.
    let insideDirectory: URL
    /// The store's folder name: the store's name, or a placeholder when that is invalid (see
    /// ``init(insideDirectory:name:)``).
    let folderName: String
    /// `insideDirectory`'s path.
    let parentPath: String
    /// The store's folder, `insideDirectory/name`.
    let directoryPath: String
    /// The data file, `insideDirectory/name/store.tinystorage`.
    let dataPath: String

    /// The store's folder as a URL, built from `insideDirectory` when asked for.
    var directory: URL { insideDirectory.appendingPathComponent(folderName, isDirectory: true) }
    /// The data file as a URL, built from `insideDirectory` when asked for.
    var dataFile: URL { directory.appendingPathComponent(Self.dataFileName, isDirectory: false) }

    var lockPath: String { FileIO.path(of: Self.lockFileName, in: directoryPath) }
    var compactionPath: String { dataPath + ".compacting" }
    var originalFilePath: String { FileIO.path(of: Self.originalFileName, in: directoryPath) }
    var quarantineDirectoryPath: String { FileIO.path(of: Self.quarantineDirectoryName, in: directoryPath) }

    /// NB: the paths are joined as strings, once, rather than derived from URLs on each use:
    /// appending to a `URL` and reading its `path` back was an eighth of a cold open (1,000 keys).
    /// They are the paths the URLs name (tested with spaces, `%`, `?`, `#`, combining marks,
    /// `/`, relative URLs).
    init(insideDirectory: URL, name: String) {
        // NB: an invalid name still yields a location (init cannot throw, for source
        // compatibility), one that is never created: the engine checks `validate(name:)` first.
        let safeName = (try? Self.validate(name: name)) != nil ? name : "invalid-store-name"
        self.insideDirectory = insideDirectory
        folderName = safeName
        parentPath = insideDirectory.path
        directoryPath = FileIO.path(of: safeName, in: parentPath)
        dataPath = FileIO.path(of: Self.dataFileName, in: directoryPath)
    }

    /// Throws `.invalidName` for names that would escape `insideDirectory` or cannot be a file name.
    static func validate(name: String) throws(TinyStorageError) {
        let problem: String? = {
            if name.isEmpty { return "is empty" }
            if name == "." || name == ".." { return "is '.' or '..'" }
            if name.utf8.contains(UInt8(ascii: "/")) { return "contains '/'" }
            if name.utf8.contains(0) { return "contains a NUL character" }
            if name.utf8.count > maximumNameLength { return "is longer than \(maximumNameLength) bytes" }
            return nil
        }()
        if let problem {
            throw TinyStorageError(
                .invalidName,
                "The store name \(problem). Use a plain file name such as \"settings\"; the store "
                    + "lives in a folder of that name inside `insideDirectory`.")
        }
    }
}
