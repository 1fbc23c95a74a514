extension Engine {
    /// Writes the entries, as of one moment between two commits, as a verified data file of a
    /// new store folder `name` in `parentPath` (see `TinyStorage.backup(to:)`).
    ///
    /// Under the engine's lock only to take the snapshot, after catching up; the file is written
    /// with no lock held, as a compaction writes its new file (values that expired left out,
    /// deadlines kept), then renamed into place without replacing anything.
    func backup(toFolder name: String, in parentPath: String) throws(TinyStorageError) {
        let snapshot = try withState { (state) throws(TinyStorageError) in
            try prepare(&state)
            return (entries: state.index.entries, generation: state.log.generation, sequence: state.log.sequence)
        }
        let folder = try StoreFolder.open(parentPath: parentPath, name: name, io: io, create: true)
        guard let folder else {
            throw TinyStorageError(
                .io, "The backup folder '\(FileIO.path(of: name, in: parentPath))' could not be created.")
        }
        let existing = "'\(folder.path)' already holds a store; back up into a new folder, or remove that one first."
        if try folder.fileStatus(StoreLocation.dataFileName) != nil { throw TinyStorageError(.io, existing) }
        let written = try writeVerifiedFile(
            in: folder,
            bytes: Self.compactedFile(
                generation: snapshot.generation + 1, baseSequence: snapshot.sequence, entries: snapshot.entries,
                version: LogFormat.version, now: now
            ).bytes,
            noting: nil)
        switch folder.renameWithoutReplacing(written.name, to: StoreLocation.dataFileName) {
        case .success: break
        case .failure(.exists):
            _ = folder.remove(written.name)
            throw TinyStorageError(.io, existing)
        case .failure(let error):
            _ = folder.remove(written.name)
            throw .system(error, "put the backup in place in", path: folder.path)
        }
        if case .failure(let error) = folder.sync() {
            throw .system(error, "flush the backup folder", path: folder.path)
        }
    }
}
