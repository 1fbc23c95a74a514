import Foundation

extension Engine {
    /// The original TinyStorage's data to import into a new data file, or `nil` when there is none.
    ///
    /// The original library kept a binary property list `tiny-storage.plist` of `[String: Data]`,
    /// each value the JSON of one stored value, or the raw bytes of a stored `Data`. Values are
    /// imported byte for byte as ``ValueKind/original``, so each reads back as the original
    /// library read it: as `Data`, the bytes; as any other type, JSON. Called only when our data
    /// file does not exist yet, under the file lock.
    ///
    /// - Throws: `.permissionDenied`/`.io` when the plist exists but cannot be read, `.corrupted`
    ///   when it cannot be parsed: the store stays unavailable, our file is not created, and the
    ///   plist is never changed, so no value it holds can be shadowed by an empty store.
    func originalDataToAdopt() throws(TinyStorageError) -> LogCommit? {
        let path = location.originalFilePath
        guard case .success = io.status(atPath: path) else { return nil }
        let bytes: [UInt8]
        switch io.open(path, flags: O_RDONLY).flatMap({ fd in
            defer { io.close(fd) }
            return io.status(fd).flatMap { io.read(fd, count: $0.size, at: 0) }
        }) {
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
        logger.log(
            .info, "Importing \(operations.count) values from the original TinyStorage file \(path); the file is kept.")
        return LogCommit(operations: operations)
    }
}
