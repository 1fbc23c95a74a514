import Foundation

extension Engine {
    /// The original TinyStorage's data to import into a new data file, or `nil` when there is none.
    ///
    /// The original library kept a binary property list `tiny-storage.plist` of `[String: Data]`,
    /// each value the JSON of one stored value, or the raw bytes of a stored `Data`. Values are
    /// imported byte for byte as ``ValueKind/original``, so each reads back as the original
    /// library read it: as `Data`, the bytes; as any other type, JSON. The commit is the new
    /// file's first record (sequence 1). Called only when our data file does not exist yet.
    ///
    /// - Throws: `.permissionDenied`/`.io` when the plist exists but cannot be read, `.corrupted`
    ///   when it cannot be parsed: the store stays unavailable, our file is not created, and the
    ///   plist is never changed, so no value it holds can be shadowed by an empty store.
    func originalDataToAdopt(in folder: StoreFolder) throws(TinyStorageError) -> LogCommit? {
        let path = location.originalFilePath
        guard let fd = try folder.openFile(StoreLocation.originalFileName, writable: false, creation: .never) else {
            return nil
        }
        defer { io.close(fd) }
        let bytes: [UInt8]
        switch io.status(fd).flatMap({ io.read(fd, count: $0.size, at: 0) }) {
        case .success(let value): bytes = value
        case .failure(let error): throw .system(error, "read the original TinyStorage file", path: path)
        }
        let dictionary: [String: Data]
        do {
            let object = try PropertyListSerialization.propertyList(from: Data(bytes), options: [], format: nil)
            guard let values = object as? [String: Data] else {
                throw TinyStorageError(.corrupted, "it is not a dictionary of data values")
            }
            dictionary = values
        } catch {
            throw TinyStorageError(
                .corrupted,
                "The original TinyStorage file '\(path)' could not be parsed, so it was not imported and "
                    + "was left untouched. Move it away to start with an empty store.",
                underlying: error)
        }
        guard !dictionary.isEmpty else { return nil }
        let operations = dictionary.keys.sorted().compactMap { key -> LogOperation? in
            guard let value = dictionary[key], !key.isEmpty, !key.utf8.contains(0) else { return nil }
            return .put(key: key, value: value, kind: .original)
        }
        return LogCommit(sequence: 1, operations: SmallList(operations))
    }
}
