import Foundation

extension TinyStorage {
    /// Whether an instance may change its store.
    public enum Access: Sendable, Hashable {
        /// Reads and writes; creates the store's folder and files when they do not exist. The default.
        case readWrite
        /// Reads only, with read permission only: creates nothing and writes nothing — not the
        /// folder, not `store.lock`, not even a repair of a damaged file — and every write throws
        /// ``TinyStorageError/Code/readOnly`` having done nothing. Other processes' commits are
        /// still read and announced, as for any store.
        ///
        /// For an inspector, a backup tool, or an extension that must not write. The store's
        /// folder and files may belong to another user (they still must not be links, and the
        /// folder must not be writable by others). A store whose files do not exist yet, or that
        /// needs a repair only a writer makes, is unavailable until a process that may write it
        /// has opened it.
        ///
        /// On Linux a read-only store looks for other processes' commits every 5 ms, as it cannot
        /// ask writers to wake it (that takes writing the lock page); on Apple platforms it is
        /// told of them by the file system, as any store is.
        ///
        /// ```swift
        /// let settings = TinyStorage(insideDirectory: support, name: "settings", access: .readOnly)
        /// let streak = settings.retrieve(type: Int.self, forKey: "streak")
        /// ```
        case readOnly
    }

    /// Who may read the folder and files a store creates, besides their owner.
    ///
    /// A store's files are its owner's alone unless you say otherwise: ``ownerOnly`` (mode 0600,
    /// folders 0700) is the default. A daemon whose store an inspector or a tool running as
    /// another user reads with ``Access/readOnly`` gives ``ownerAndGroup`` (0640, folders 0750)
    /// or ``everyone`` (0644, folders 0755). Others never get write permission, and
    /// `quarantine/`, which holds damaged bytes, stays owner-only. The process's umask applies.
    ///
    /// It applies to what the store creates from now on: its folder, its lock file and each data
    /// file that a compaction or a repair writes. To share a store that already exists, change the
    /// permissions of its folder and files once (`chmod`) and open every writer with the same
    /// setting, so a compaction does not take the readers' access away again.
    ///
    /// ```swift
    /// let settings = TinyStorage(insideDirectory: support, name: "settings", readableBy: .ownerAndGroup)
    /// ```
    public enum Readers: Sendable, Hashable {
        /// Only the owner reads and writes (0600, folders 0700). The default.
        case ownerOnly
        /// The owner's group may read too (0640, folders 0750).
        case ownerAndGroup
        /// Every user may read (0644, folders 0755).
        case everyone

        /// The read bits for group and others.
        var sharedReading: mode_t {
            switch self {
            case .ownerOnly: 0
            case .ownerAndGroup: 0o040
            case .everyone: 0o044
            }
        }
    }

    /// Whether this instance may change its store (see ``Access``).
    ///
    /// ```swift
    /// if storage.access == .readOnly { hideEditButtons() }
    /// ```
    public var access: Access { engine.options.readOnly ? .readOnly : .readWrite }
}
