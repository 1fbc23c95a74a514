public import Foundation

extension TinyStorage {
    /// Writes a consistent copy of the store into the folder `directory`, which must not hold a
    /// store yet: a store folder of its own, which `TinyStorage(insideDirectory:name:)` (its
    /// parent and its name) and every `tinystorage` command open as they are.
    ///
    /// The copy holds what the store held at one moment between two commits, caught up with every
    /// other process's commits first: one data file, written under a new name, flushed, read back
    /// and verified, then renamed into place, so a crash never leaves half a backup. No lock is
    /// held while it is written, and the store is not changed.
    ///
    /// ```swift
    /// let backups = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
    /// try storage.backup(to: backups.appendingPathComponent("settings-backup"))
    /// ```
    ///
    /// To restore one, quit every process that has the store open, then put the backup folder in
    /// the store folder's place (or its `store.tinystorage` in place of the store's, removing the
    /// store's `store.lock`). Copying a store folder that is in use with `cp -r`, `rsync` or a
    /// backup tool instead takes its files at different moments: TinyStorage reads every record
    /// of such a copy that verifies, but commits made while it was copied may be missing from it.
    ///
    /// - Throws: `.unavailable` when the store cannot be read; `.io` when `directory` already
    ///   holds a store; `.unsafeFile` when something other than a private folder of this user is
    ///   there; `.permissionDenied`, `.noSpace` or `.io` when the copy cannot be written (nothing
    ///   is left in `directory` then but the folder).
    public func backup(to directory: URL) throws {
        let path = directory.standardizedFileURL.path
        let name = (path as NSString).lastPathComponent
        let parent = (path as NSString).deletingLastPathComponent
        guard !name.isEmpty, name != "/", name != ".", name != ".." else {
            throw TinyStorageError(.invalidName, "'\(directory.path)' cannot be a backup folder; name a folder.")
        }
        try engine.backup(toFolder: name, in: parent.isEmpty ? "/" : parent)
    }
}
