import Foundation

@testable import TinyStorage

/// The states a store went through, in commit order, and what a crash may take from them: the
/// model the crash runs check a reopened store against.
///
/// A crash may lose the newest commits, never an older one without the newer ones (a prefix of
/// the commit order survives), and never a commit that was flushed: by `synchronize()`, by an
/// `.immediate` commit returning, or because a reopened store read it from the disk.
struct CommitHistory {
    typealias Entries = [String: StoredValue]

    /// `states[k]`: the entries after the k-th commit; `states[0]`: the empty store.
    private(set) var states: [Entries]
    /// The last commit that must survive any crash.
    private(set) var durable = 0
    /// The last commit the data file's durable mark is sure to cover after a crash. The mark is
    /// written after the flush it records and reaches the disk with the next one, so it trails
    /// ``durable`` by one flush: a file cut between the two cannot be told from a power loss
    /// during the last flush, and only a cut below this one must be reported as data loss.
    private(set) var recordedDurable = 0
    /// The commit the mark written after this process's last flush records: written, not yet
    /// flushed. A reopened store writes no mark for what it read, so after a reopen this is the
    /// mark already on the disk.
    private var writtenMark = 0
    /// What the commit whose call never returned (the crash came first) would make: it may or may
    /// not be there.
    private(set) var inFlight: Entries?

    init() { states = [[:]] }

    /// The state after the last acknowledged commit.
    var current: Entries { states[states.count - 1] }

    /// A commit whose call returned. Commits that change nothing are not commits (the store
    /// writes nothing for them) and are ignored.
    mutating func acknowledge(_ state: Entries, flushed: Bool) {
        guard state != current else { return }
        states.append(state)
        if flushed { markFlushed() }
    }

    /// A commit whose call did not return.
    mutating func attempt(_ state: Entries) {
        if state != current { inFlight = state }
    }

    /// Everything acknowledged so far is on stable storage.
    mutating func markFlushed() {
        recordedDurable = max(recordedDurable, writtenMark)
        durable = states.count - 1
        writtenMark = durable
    }

    /// `synchronize()` returned, or every background flush the store had scheduled ran:
    /// everything acknowledged is on stable storage, and so is the durable mark that says so.
    mutating func markSynchronized() {
        durable = states.count - 1
        recordedDurable = durable
        writtenMark = durable
    }

    /// After a crash and a reopen that read `state` (a state the history went through, or the
    /// in-flight one): the commits after it are gone, and it was read from the disk, so it must
    /// survive the next crash. The older states stay, so a later loss of them is recognized.
    mutating func resume(from state: Entries) {
        if let index = states.lastIndex(of: state) {
            states.removeSubrange((index + 1)...)
        } else {
            states.append(state)
        }
        durable = states.count - 1
        recordedDurable = min(recordedDurable, durable)
        writtenMark = recordedDurable
        inFlight = nil
    }

    /// What a reopened store holding `entries` says about the crash.
    enum Judgement: Equatable {
        /// A state the commit order went through, at or after the last durable one: `lost`
        /// acknowledged commits did not survive (the power-loss window).
        case prefix(lost: Int)
        /// The commit whose call never returned is there (it reached the disk in time).
        case inFlightKept
        /// A state the commit order went through, but older than what was flushed; `belowMark`:
        /// older than what the durable mark is sure to cover, too.
        case olderThanFlushed(lost: Int, belowMark: Bool)
        /// No state the commit order went through: a newer commit without an older one, or
        /// something that was never committed.
        case notAPrefix
    }

    func judge(_ entries: Entries) -> Judgement {
        if let inFlight, entries == inFlight { return .inFlightKept }
        guard let index = states.lastIndex(of: entries) else { return .notAPrefix }
        let lost = states.count - 1 - index
        return index >= durable
            ? .prefix(lost: lost) : .olderThanFlushed(lost: lost, belowMark: index < recordedDurable)
    }
}
