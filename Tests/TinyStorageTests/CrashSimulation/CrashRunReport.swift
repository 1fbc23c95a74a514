import Foundation
import Testing

/// What crash runs found: where they crashed, what survived, and what broke the contract.
struct CrashRunReport: Sendable {
    /// Where a crash came.
    enum Place: String, CaseIterable, Sendable {
        case store, remove, update, bulkStore, reset, compaction, synchronize, reopen
        case backgroundFlush = "background flush"
        case repair = "open (repair)"
        case adoption, salvage
        case betweenOperations = "between operations"
    }

    /// The ways a reopened store can break the durability contract.
    enum ViolationKind: String, CaseIterable, Sendable {
        /// Issue 11's first known gap: a torn record N with N+1 surviving gets N+1 applied.
        case newerWithoutOlder = "a newer commit survived without an older one"
        /// Issue 11's second known gap: a file cut below what was flushed opens with keys missing.
        case flushedLostAfterMediaDamage =
            "a file cut below what was flushed opened with flushed commits missing, and no throwing call said so"
        /// Found by these runs: the store's folder is created and never made durable (its parent
        /// is never synced), so a crash can take the whole store, flushed commits included.
        case storeFolderLost = "the store's folder vanished in a crash, with flushed commits in it"
        case flushedLost = "flushed or acknowledged commits were lost by a crash"
        case incompleteReplacement =
            "after a crash in a compaction or repair, the data file was neither the old one nor complete"
        case falseDamageReport = "a crash was reported as damage by a throwing call, with no damage done"
        case reopenMismatch = "reopening without a crash did not read what was committed"
        case unexpectedError = "a call failed while the disk worked"
    }

    struct Violation: Sendable, CustomStringConvertible {
        var kind: ViolationKind
        var seed: UInt64
        var detail: String

        var description: String { "seed \(seed): \(kind.rawValue): \(detail)" }
    }

    var trials = 0
    var crashes: [Place: Int] = [:]
    /// How many acknowledged commits each crash took (inside the power-loss window).
    var commitsLost: [Int: Int] = [:]
    /// Crashes after which the commit whose call never returned was there.
    var inFlightKept = 0
    /// Crashes after which a throwing call reported damage.
    var damageReported = 0
    /// Crashes followed by media damage (the data file cut below what was flushed).
    var mediaDamage = 0
    /// Media cuts inside the last flush, past the durable mark on the disk: treated as a power
    /// loss during that flush, as documented (the mark trails the flushes by one).
    var cutInsideLastFlush = 0
    /// Crashes that lost the disk's cache without restarting the machine (the lock file's page
    /// from this boot, as the disk kept it).
    var cacheLossesWithoutRestart = 0
    /// Reopens after a crash that cut off the remains of a torn commit (an interrupted write).
    var tornCommitsCut = 0
    /// Crashes that came after such a cut, before the next reopen: the cut's own power loss.
    var crashesAfterACut = 0
    var violations: [Violation] = []

    var crashPoints: Int { crashes.values.reduce(0, +) }

    mutating func merge(_ other: CrashRunReport) {
        trials += other.trials
        crashes.merge(other.crashes, uniquingKeysWith: +)
        commitsLost.merge(other.commitsLost, uniquingKeysWith: +)
        inFlightKept += other.inFlightKept
        damageReported += other.damageReported
        mediaDamage += other.mediaDamage
        cutInsideLastFlush += other.cutInsideLastFlush
        cacheLossesWithoutRestart += other.cacheLossesWithoutRestart
        tornCommitsCut += other.tornCommitsCut
        crashesAfterACut += other.crashesAfterACut
        violations += other.violations
    }

    func violations(of kind: ViolationKind) -> [Violation] { violations.filter { $0.kind == kind } }

    /// A few lines for the test log: crash points by place, what survived, violations by kind
    /// with up to three seeds each.
    func summary(title: String) -> String {
        var lines = ["\(title): \(trials) trials, \(crashPoints) crash points"]
        lines.append(
            "  crashed in: "
                + Place.allCases.compactMap { place in crashes[place].map { "\(place.rawValue) \($0)" } }
                .joined(separator: ", "))
        lines.append(
            "  acknowledged commits lost per crash: "
                + commitsLost.keys.sorted().map { "\($0): \(commitsLost[$0] ?? 0)" }.joined(separator: ", ")
                + "; in-flight commit kept \(inFlightKept); damage reported \(damageReported); "
                + "media damage \(mediaDamage) (inside the last flush \(cutInsideLastFlush)); "
                + "cache lost without a restart \(cacheLossesWithoutRestart); "
                + "torn commits cut \(tornCommitsCut), crashes after a cut \(crashesAfterACut)")
        if violations.isEmpty { lines.append("  violations: none") }
        for kind in ViolationKind.allCases {
            let found = violations(of: kind)
            guard !found.isEmpty else { continue }
            let seeds = found.prefix(3).map { String($0.seed) }.joined(separator: ", ")
            lines.append("  \(found.count) × \(kind.rawValue) (seeds \(seeds))")
        }
        return lines.joined(separator: "\n")
    }

    /// Records every violation as a test issue.
    func recordIssues(sourceLocation: SourceLocation = #_sourceLocation) {
        for kind in ViolationKind.allCases {
            let found = violations(of: kind)
            guard let first = found.first else { continue }
            Issue.record(Comment(rawValue: "\(found.count) × \(first)"), sourceLocation: sourceLocation)
        }
    }
}
