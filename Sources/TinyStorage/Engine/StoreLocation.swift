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

    let directory: URL
    let dataFile: URL

    var directoryPath: String { directory.path }
    var dataPath: String { dataFile.path }
    var lockPath: String { directory.appendingPathComponent(Self.lockFileName).path }
    var compactionPath: String { dataPath + ".compacting" }
    var originalFilePath: String { directory.appendingPathComponent(Self.originalFileName).path }
    var quarantineDirectoryPath: String {
        directory.appendingPathComponent(Self.quarantineDirectoryName).path
    }

    init(insideDirectory: URL, name: String) {
        // NB: an invalid name still yields a location (init cannot throw, for source
        // compatibility), one that is never created: the engine checks `validate(name:)` first.
        let safeName = (try? Self.validate(name: name)) != nil ? name : "invalid-store-name"
        directory = insideDirectory.appendingPathComponent(safeName, isDirectory: true)
        dataFile = directory.appendingPathComponent(Self.dataFileName, isDirectory: false)
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
