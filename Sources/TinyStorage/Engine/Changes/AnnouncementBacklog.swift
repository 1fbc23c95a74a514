/// The changes drained and waiting for the announcing queue, one notification each (see
/// ``ChangeDelivery``), kept small however far behind that queue falls.
///
/// - Another process's consecutive changes that carry the same writeID (or none) become one
///   announcement naming every key they changed, in the order they first changed: a process that
///   commits flat out costs an observer one notification per look, not one per commit.
/// - Once ``limit`` announcements wait (the announcing queue runs slower than commits arrive, or
///   not at all, as in a tool that never services the main queue), every further change joins
///   the last one: its keys are added, and it keeps its writeID only when the change carries the
///   same one (otherwise it has none: a writeID always names the writer of everything a
///   notification lists). Announcing one commit costs over a microsecond on Linux; a loop
///   committing faster than that grew the backlog without bound (15 GB within seconds, until
///   the system killed the process, in the issue 32 benchmark).
///
/// Local changes are otherwise announced one per commit, with their own writeIDs, as the original
/// TinyStorage does. Value streams are fed every change before it gets here.
struct AnnouncementBacklog {
    /// How many announcements may wait before further changes join the last one.
    static let limit = 1_024

    private(set) var changes: [ChangeSet] = []
    /// The keys of the last announcement, once a change joined it.
    private var lastKeys: Set<String>?

    /// Adds `change` after those waiting, joining it to the last one where the rules above say so.
    mutating func add(_ change: ChangeSet) {
        guard let last = changes.last else { return start(change) }
        let sameWriter = last.writeID == change.writeID
        if last.isExternal, change.isExternal, sameWriter {
            join(change, writeID: last.writeID, isExternal: true)
        } else if changes.count >= Self.limit {
            join(change, writeID: sameWriter ? last.writeID : nil, isExternal: last.isExternal && change.isExternal)
        } else {
            start(change)
        }
    }

    /// Hands over the waiting announcements, leaving none.
    mutating func take() -> [ChangeSet] {
        lastKeys = nil
        defer { changes = [] }
        return changes
    }

    private mutating func start(_ change: ChangeSet) {
        changes.append(change)
        lastKeys = nil
    }

    private mutating func join(_ change: ChangeSet, writeID: String?, isExternal: Bool) {
        let index = changes.count - 1
        var keys = lastKeys ?? Set(changes[index].keys)
        for key in change.keys where keys.insert(key).inserted { changes[index].keys.append(key) }
        lastKeys = keys
        changes[index].writeID = writeID
        changes[index].isExternal = isExternal
        changes[index].sequence = change.sequence
    }
}
