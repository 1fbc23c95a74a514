import Foundation

// Reporting a repair that lost durable data to the throwing reads, key by key.
//
// When a repair finds that data known to be on stable storage was damaged or is missing (see
// `RecoveryReport.isDataLoss`), the values of the keys the damaged bytes held may be older than
// they should be, or gone. A throwing read of such a key must not answer as if nothing happened:
// its first one throws `.corrupted`, naming the key. A read of a key the damage did not touch
// answers as usual: telling a reader who asked for `streak` that `streak` is corrupt when the loss
// was elsewhere would make every read after a repair fail once, for nothing.
//
// Rules of `unreportedDataLoss` (the store's, under its own lock):
// - The engine hands a loss over once (`Engine.takePendingDataLoss()`); it is taken, with the
//   keys its recovery reports name, at the start of every read that misses the decoded-value
//   cache, and of every throwing read. So no read that could report it skips it.
// - A key is reported once, by the first throwing read of that key, then forgotten. When the
//   damaged bytes named no key, any key may have been hit: the first throwing read of any key
//   reports the loss, once, for all of them.
// - While a key waits for its report, its decoded value is not cached, so the next throwing read
//   of it misses the cache and reaches the report. Other keys are cached as usual.
// - Writes do not clear a report: a key written after the loss (an `update` or an increment
//   computed from what was left, say) was still hit by it.
extension TinyStorage {
    /// The data losses the throwing reads have not reported yet.
    struct UnreportedDataLoss: Sendable {
        /// The engine's error for the latest loss, the cause of each report; `nil` when there is
        /// nothing to report.
        var error: TinyStorageError?
        /// The keys still to report.
        var keys: Set<String> = []
        /// Whether the damaged bytes named no key, so any key may have been hit.
        var mayHaveHitAnyKey = false
        /// How many of ``recoveryReports`` have been looked at for their keys.
        var reportsSeen = 0

        /// Whether a loss may have hit `name` and was not reported for it yet.
        func waits(forKey name: String) -> Bool {
            error != nil && (mayHaveHitAnyKey || keys.contains(name))
        }

        mutating func forgetAll() {
            error = nil
            keys = []
            mayHaveHitAnyKey = false
        }
    }

    /// Throws `.corrupted` when a repair's data loss may have hit `name` and no throwing read of
    /// it said so yet; then forgets it for that key.
    @usableFromInline
    func throwPendingDataLoss(forKey name: String) throws(TinyStorageError) {
        takeDataLossFromEngine()
        let report = unreportedDataLoss.withLock { loss -> TinyStorageError? in
            guard let error = loss.error, loss.waits(forKey: name) else { return nil }
            if loss.mayHaveHitAnyKey {
                loss.forgetAll()
                return error
            }
            loss.keys.remove(name)
            if loss.keys.isEmpty { loss.forgetAll() }
            return Self.dataLossError(error, key: name)
        }
        if let report { throw report }
    }

    /// Throws `.corrupted` when a repair's data loss may have hit any key and no throwing read
    /// said so yet (for reads of the whole store); then forgets it for every key.
    func throwPendingDataLossForAnyKey() throws(TinyStorageError) {
        takeDataLossFromEngine()
        let report = unreportedDataLoss.withLock { loss -> TinyStorageError? in
            defer { loss.forgetAll() }
            return loss.error
        }
        if let report { throw report }
    }

    /// Whether `name`'s decoded value may be cached: not while a report of a loss that may have
    /// hit it waits for its first throwing read.
    func mayCacheValue(forKey name: String) -> Bool {
        // NB: the read just caught up; catching up again here doubled the work of every read
        // while another process commits.
        takeDataLossFromEngine(catchingUp: false)
        return !unreportedDataLoss.withLock { $0.waits(forKey: name) }
    }

    // MARK: Internals

    /// Takes a loss the engine found over, with the keys its new recovery reports name.
    private func takeDataLossFromEngine(catchingUp: Bool = true) {
        guard let error = engine.takePendingDataLoss(catchingUp: catchingUp) else { return }
        let reports = recoveryReports
        unreportedDataLoss.withLock { loss in
            loss.error = error
            var named = false
            for report in reports.dropFirst(loss.reportsSeen) where report.isDataLoss {
                // NB: a report that names no key leaves every key possibly hit.
                if report.possiblyAffectedKeys.isEmpty { loss.mayHaveHitAnyKey = true }
                loss.keys.formUnion(report.possiblyAffectedKeys)
                named = named || !report.possiblyAffectedKeys.isEmpty
            }
            if !named { loss.mayHaveHitAnyKey = true }  // a loss no new report describes: any key
            loss.reportsSeen = reports.count
        }
    }

    /// The error a throwing read of `key` reports a loss with.
    private static func dataLossError(_ loss: TinyStorageError, key: String) -> TinyStorageError {
        TinyStorageError(
            .corrupted,
            "The value of \"\(key)\" may be older than it should be, or missing: \(loss.message) The "
                + "damaged bytes held this key; it now holds what verified. This is reported once.",
            key: key, underlying: loss)
    }
}
