import Foundation

@testable import TinyStorage

/// One model-based crash run: a store on a simulated disk, random operations checked against a
/// ``CommitHistory``, and crashes — at a random call inside an operation (a commit, a flush, a
/// background flush, a compaction, the repair an open makes) or between operations — each
/// followed by a reopen on
/// what the power loss left, where the contract is checked:
///
/// - the store opens, or a throwing call reports damage — never silently empty;
/// - what it holds is a state the commit order went through (a prefix), never a newer commit
///   without an older one;
/// - nothing flushed is lost: with `.immediate` every acknowledged commit, with `.standard`
///   everything before the last completed `synchronize()`;
/// - after a crash in a compaction or repair, the data file is the old one or the new one,
///   complete.
///
/// Everything random comes from `seed`, so a trial replays exactly.
struct CrashTrial {
    let seed: UInt64
    let durability: TinyStorage.Durability
    private(set) var report = CrashRunReport()

    private var generator: SeededGenerator
    /// Background flushes, run at random points when the trial has them; drawn from a generator
    /// of their own so that a trial without them replays as it did before they existed.
    private let flushes: ManualFlushes?
    private var flushGenerator: SeededGenerator
    /// Whether each crash restarts the machine or only loses the disk's cache (see
    /// ``SimulatedDisk/crash(seed:style:reboot:)``); drawn from a generator of its own, as the
    /// flushes are, so that seeds replay the operations and crashes they always did.
    private var rebootGenerator: SeededGenerator
    private var disk: SimulatedDisk
    private var storage: TinyStorage?
    private var history = CommitHistory()
    /// The data file's inode when a compaction or repair began, while one runs.
    private var replacing: (place: CrashRunReport.Place, inode: UInt64?)?
    private var mediaDamage = false
    /// Whether an open that then crashed reported damage, for the check after the next one.
    private var damageReportedBeforeCrash = false
    /// Whether a crash came since the store was last opened and checked.
    private var hasCrashed = false
    /// Whether the last crash took the store's folder itself (its creation was never made durable).
    private var folderLost = false
    /// Whether the store open now cut off the remains of a torn commit when it reopened.
    private var cutATornCommit = false
    /// Whether to keep ``trace`` (when a single trial is replayed).
    let isTracing: Bool
    /// What the trial did, step by step.
    private(set) var trace: [String] = []

    static let keys = (0..<6).map { "k\($0)" }
    /// Keys that only ever hold integers, for `update`.
    static let counters = ["n0", "n1"]

    init(seed: UInt64, durability: TinyStorage.Durability, backgroundFlushes: Bool = true, isTracing: Bool = false) {
        self.seed = seed
        flushes = backgroundFlushes ? ManualFlushes() : nil
        flushGenerator = SeededGenerator(seed: seed ^ 0x9E37_79B9_7F4A_7C15)
        rebootGenerator = SeededGenerator(seed: seed ^ 0xC2B2_AE3D_27D4_EB4F)
        self.isTracing = isTracing
        self.durability = durability
        var generator = SeededGenerator(seed: seed)
        // NB: a quarter of the trials on a file system where commits append with `pwrite` (see
        // `AppendMapping`), the rest through a mapping; chosen from the seed, not the generator,
        // so the seeds replayed elsewhere keep their sequence.
        disk = SimulatedStore.makeDisk(
            boot: generator.next(), fileSystemType: seed % 4 == 3 ? OtherFileSystem.btrfs : AppendMapping.tmpfs)
        // NB: half the trials start where the app ran before (the store's folder exists and is
        // durable), so the finding about the folder's creation does not hide the others.
        if Bool.random(using: &generator) { disk.makeSettledDirectories(atPath: SimulatedStore.directoryPath) }
        self.generator = generator
    }

    /// Runs the trial: one to three rounds of operations, each ended by a crash, then a last
    /// reopen. Stops at the first violation.
    mutating func run() {
        report.trials = 1
        let rounds = Int.random(in: 1...3, using: &generator)
        for round in 0...rounds where report.violations.count < 8 {
            guard openAndCheck(mayCrash: round > 0) else { return }
            if round == rounds { break }
            runOperations()
            crash()
        }
    }

    // MARK: Opening and checking

    /// Opens the store (perhaps crashing inside the repair that opening after a crash makes) and
    /// checks what it holds. Returns `false` when the trial cannot go on.
    private mutating func openAndCheck(mayCrash: Bool) -> Bool {
        for _ in 0..<4 {
            let crashInside = mayCrash && Int.random(in: 0..<3, using: &generator) == 0
            if crashInside { disk.armCrash(atChange: disk.changeCount + Int.random(in: 0..<12, using: &generator)) }
            replacing = (.repair, disk.status(atPath: SimulatedStore.dataPath)?.inode)
            let store = SimulatedStore.open(on: disk, durability: durability, flushes: flushes)
            let first = Result { () throws(TinyStorageError) in try store.rawEntries() }
            if isTracing {
                note(
                    "open\(crashInside ? " (crash armed)" : ""): \(first.map { $0.keys.sorted() })"
                        + "\(disk.isCrashed ? " CRASHED" : "")")
            }
            if disk.isCrashed {
                // NB: an open that reported the loss before the power went counts as reporting
                // it: the repair it made may be complete, and the next open find nothing to say.
                if case .failure(let error) = first, SimulatedStore.reportsDamage(error), mediaDamage {
                    damageReportedBeforeCrash = true
                }
                storage = store
                report.crashes[.repair, default: 0] += 1
                crash()
                continue
            }
            disk.disarm()
            replacing = nil
            storage = store
            return check(first, store)
        }
        return false
    }

    /// Checks what a reopened store holds against the history; on success the history goes on
    /// from there.
    private mutating func check(_ first: Result<CommitHistory.Entries, TinyStorageError>, _ store: TinyStorage) -> Bool
    {
        var observed = first
        var reported = damageReportedBeforeCrash
        if case .failure(let error) = first {
            guard SimulatedStore.reportsDamage(error) else {
                violation(.unexpectedError, "reopening threw \(error)")
                return false
            }
            reported = true
            report.damageReported += 1
            if !mediaDamage { violation(.falseDamageReport, "\(error)") }
            observed = Result { () throws(TinyStorageError) in try store.rawEntries() }
        }
        guard case .success(let entries) = observed else { return false }  // reported, and stays unavailable
        cutATornCommit = hasCrashed && store.recoveryReports.contains(where: \.isInterruptedWrite)
        if cutATornCommit { report.tornCommitsCut += 1 }
        let found: CrashRunReport.ViolationKind?
        switch history.judge(entries) {
        case .prefix(let lost):
            if hasCrashed { report.commitsLost[lost, default: 0] += 1 }
            found = nil
        case .inFlightKept:
            report.inFlightKept += 1
            found = nil
        case .olderThanFlushed where reported, .notAPrefix where reported:
            found = nil  // reported as damage: what is left is what could be saved
        case .olderThanFlushed(_, belowMark: false) where mediaDamage:
            // NB: a cut inside the last flush, past the durable mark on the disk: the file looks
            // exactly like one whose last flush a power loss interrupted (documented limit).
            report.cutInsideLastFlush += 1
            found = nil
        case .olderThanFlushed:
            // NB: a record applied past a torn one can make an older state again (a remove of
            // what the lost commit stored): that is the first gap, seen through a salvage.
            found =
                mediaDamage
                ? .flushedLostAfterMediaDamage
                : folderLost
                    ? .storeFolderLost
                    : store.recoveryReports.contains { !$0.isInterruptedWrite }
                        ? .newerWithoutOlder : .flushedLost
        case .notAPrefix:
            // NB: a cut through a compacted file leaves some of its keys: no state the commit
            // order went through, but the loss of flushed data all the same.
            found = mediaDamage ? .flushedLostAfterMediaDamage : .newerWithoutOlder
        }
        if let found {
            violation(found, "\(entries.count) keys left; reports: \(describeReports(store))")
        }
        // NB: after a violation too, the run goes on from what the store holds, so one finding
        // does not hide the next.
        history.resume(from: entries)
        mediaDamage = false
        damageReportedBeforeCrash = false
        folderLost = false
        hasCrashed = false
        return true
    }

    /// Adds `line` to the trace when tracing: callers check ``isTracing`` first where making
    /// the line costs something.
    private mutating func note(_ line: String) {
        if isTracing { trace.append(line) }
    }

    /// A data file's size and the keys of each record that verifies, for the trace.
    private static func describe(_ contents: [UInt8]?) -> String {
        guard let contents else { return "none" }
        var records: [String] = []
        let scanned = contents.withUnsafeBytes { raw in
            LogScanner.scan(raw, from: min(LogFormat.headerSize, raw.count)) { commit in
                records.append("#\(commit.sequence) " + commit.operations.map(\.key).joined(separator: ","))
            }
        }
        return "\(contents.count) bytes, records \(records), \(scanned.stop) at \(scanned.end)"
    }

    private func describeReports(_ store: TinyStorage) -> String {
        let reports = store.recoveryReports
        return reports.isEmpty ? "none" : reports.map(\.description).joined(separator: " | ")
    }

    private mutating func violation(_ kind: CrashRunReport.ViolationKind, _ detail: String) {
        note("VIOLATION \(kind): \(detail)")
        report.violations.append(CrashRunReport.Violation(kind: kind, seed: seed, detail: detail))
    }

    // MARK: Operations

    /// Runs one to twelve random operations, with a crash armed at a random call among them
    /// three times in four (else the crash comes after them).
    private mutating func runOperations() {
        let count = Int.random(in: 1...12, using: &generator)
        if Int.random(in: 0..<4, using: &generator) != 0 {
            disk.armCrash(atChange: disk.changeCount + Int.random(in: 0..<count * 3, using: &generator))
        }
        for _ in 0..<count {
            let before = disk.changeCount
            let place = performRandomOperation()
            if isTracing {
                note(
                    "\(place.rawValue) (calls \(before)..<\(disk.changeCount))\(disk.isCrashed ? " CRASHED" : ""); "
                        + "history \(history.states.count - 1) commits, durable \(history.durable) (marked \(history.recordedDurable)), "
                        + "keys \(history.current.keys.sorted())")
            }
            if disk.isCrashed {
                report.crashes[place, default: 0] += 1
                return
            }
            replacing = nil
            if flushes != nil, Int.random(in: 0..<4, using: &flushGenerator) == 0 {
                runBackgroundFlushes()
                if disk.isCrashed {
                    report.crashes[.backgroundFlush, default: 0] += 1
                    return
                }
            }
        }
        disk.disarm()
        report.crashes[.betweenOperations, default: 0] += 1
    }

    private mutating func performRandomOperation() -> CrashRunReport.Place {
        let key = Self.keys.randomElement(using: &generator) ?? "k0"
        switch Int.random(in: 0..<100, using: &generator) {
        case 0..<34:
            let value = randomValue()
            commit(setting: [key: value]) { try $0.storeOrThrow(value, forKey: key) }
            return .store
        case 34..<42:
            commit(setting: [key: nil]) { try $0.storeOrThrow(nil, forKey: key) }
            return .remove
        case 42..<52:
            let counter = Self.counters.randomElement(using: &generator) ?? "n0"
            let next = (history.current[counter].flatMap { Int(String(decoding: $0.bytes, as: UTF8.self)) } ?? 0) + 1
            commit(setting: [counter: next]) { try $0.update(counter, as: Int.self) { $0 = ($0 ?? 0) + 1 } }
            return .update
        case 52..<62:
            var items: [String: any Encodable & Sendable] = [:]
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                items[Self.keys.randomElement(using: &generator) ?? "k0"] = randomValue()
            }
            commit(setting: items) { try $0.bulkStoreOrThrow(items: items.mapValues { $0 as any Encodable }) }
            return .bulkStore
        case 62..<65:
            commit(replacingWith: [:]) { try $0.resetOrThrow() }
            return .reset
        case 65..<72:
            replacing = (.compaction, disk.status(atPath: SimulatedStore.dataPath)?.inode)
            run { try $0.compactNow() }
            return .compaction
        case 72..<86:
            if run({ try $0.synchronize() }) { history.markSynchronized() }
            return .synchronize
        default:
            reopenWithoutCrash()
            return .reopen
        }
    }

    /// An integer, or a string of up to 700 bytes (a record spans sectors), now and then 3,000.
    private mutating func randomValue() -> any Encodable & Sendable {
        switch Int.random(in: 0..<20, using: &generator) {
        case 0..<8: Int.random(in: -1000...1000, using: &generator)
        case 8..<19: String(repeating: "v", count: Int.random(in: 0...700, using: &generator))
        default: String(repeating: "w", count: Int.random(in: 1000...3000, using: &generator))
        }
    }

    /// Runs a commit whose effect is setting each key to its value (`nil`: removing it).
    private mutating func commit(
        setting changes: [String: (any Encodable & Sendable)?], _ body: (TinyStorage) throws -> Void
    ) {
        var expected = history.current
        for (key, value) in changes {
            expected[key] = value.map { try? ValueCoding.encode($0, forKey: key) } ?? nil
        }
        commit(replacingWith: expected, body)
    }

    private mutating func commit(replacingWith expected: CommitHistory.Entries, _ body: (TinyStorage) throws -> Void) {
        if run(body) {
            history.acknowledge(expected, flushed: durability == .immediate)
        } else {
            history.attempt(expected)
        }
    }

    /// Runs `body` on the store; a failure is expected only once the disk has crashed.
    @discardableResult
    private mutating func run(_ body: (TinyStorage) throws -> Void) -> Bool {
        guard let storage else { return false }
        do {
            try body(storage)
            return true
        } catch {
            if !disk.isCrashed { violation(.unexpectedError, "\(error)") }
            return false
        }
    }

    /// Runs the background flushes the store scheduled, as their timer would: once they all ran,
    /// everything acknowledged is on stable storage, and so is the durable mark that says so.
    private mutating func runBackgroundFlushes() {
        guard let flushes else { return }
        let before = disk.changeCount
        let ran = flushes.runAll()
        note("background flushes: \(ran) (calls \(before)..<\(disk.changeCount))\(disk.isCrashed ? " CRASHED" : "")")
        if ran > 0 && !disk.isCrashed { history.markSynchronized() }
    }

    private mutating func reopenWithoutCrash() {
        storage = nil
        let store = SimulatedStore.open(on: disk, durability: durability, flushes: flushes)
        storage = store
        let entries = Result { () throws(TinyStorageError) in try store.rawEntries() }
        guard !disk.isCrashed else { return }
        if case .success(let entries) = entries, entries == history.current { return }
        violation(.reopenMismatch, "\(entries.map { "\($0.count) keys" })")
    }

    // MARK: Crashing

    /// Power loss: the disk becomes what it could leave, and the store instance is gone. After a
    /// crash inside a compaction or repair, checks that the data file is the old one or complete.
    /// Now and then the data file is then cut to half its size (media damage).
    private mutating func crash() {
        let crashSeed = generator.next()
        // NB: one crash in three loses the disk's cache without a restart: the lock file's page
        // is then this boot's, as the disk kept it, older (or newer) than the data file.
        let reboots = Int.random(in: 0..<3, using: &rebootGenerator) != 0
        note("crash (seed \(crashSeed))\(reboots ? "" : " without a restart") at call \(disk.changeCount)")
        let after = disk.crash(seed: crashSeed, reboot: reboots)
        if !reboots { report.cacheLossesWithoutRestart += 1 }
        if cutATornCommit { report.crashesAfterACut += 1 }
        cutATornCommit = false
        hasCrashed = true
        flushes?.discardAll()
        if isTracing {
            for (label, file) in [("live before", disk), ("after", after)] {
                note("  data file \(label): \(Self.describe(file.contents(atPath: SimulatedStore.dataPath)))")
            }
            note("  names after: \(after.names(inDirectoryAtPath: SimulatedStore.directoryPath) ?? [])")
        }
        storage = nil
        if let replacing, let status = after.status(atPath: SimulatedStore.dataPath), status.inode != replacing.inode,
            !SimulatedStore.isCompleteDataFile(after.contents(atPath: SimulatedStore.dataPath) ?? [])
        {
            violation(.incompleteReplacement, "crashed in \(replacing.place.rawValue)")
        }
        replacing = nil
        if disk.status(atPath: SimulatedStore.directoryPath) != nil,
            after.status(atPath: SimulatedStore.directoryPath) == nil
        {
            folderLost = true
        }
        disk = after
        if Int.random(in: 0..<12, using: &generator) == 0,
            let size = disk.status(atPath: SimulatedStore.dataPath)?.size
        {
            disk.cutDurably(atPath: SimulatedStore.dataPath, to: size / 2)
            mediaDamage = true
            note("  media damage: the data file cut from \(size) to \(size / 2) bytes")
            report.mediaDamage += 1
        }
    }
}
