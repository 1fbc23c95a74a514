public import Foundation

extension TinyStorage {
    /// What TinyStorage found and set aside when part of a store's file failed verification.
    ///
    /// TinyStorage never resets a damaged store silently. When a record fails its checksum, every
    /// record that still verifies is kept, a copy of the damaged bytes goes to the store's
    /// `quarantine/` folder (never deleted by the library), the store carries on in a repaired
    /// file, and a report like this one is logged and kept in ``recoveryReports``.
    public struct RecoveryReport: Sendable, CustomStringConvertible {
        /// When the damage was found.
        public let date: Date
        /// `.corrupted`, with a message saying what happened.
        public let error: TinyStorageError
        /// Byte ranges of the data file, as it was, that failed verification.
        public let damagedRanges: [Range<Int>]
        /// Verified records kept from the damaged file.
        public let recoveredRecordCount: Int
        /// Keys the damaged bytes seem to have held, read without trusting them: the values of
        /// these keys may be older than they should be, or missing. Empty when unknown.
        public let possiblyAffectedKeys: [String]
        /// Where the damaged bytes were copied.
        public let quarantineURL: URL
        /// `true` when the only damage was at the end of the file, past what was known to be on
        /// stable storage: a write interrupted by a crash, or the newest commits lost to a power
        /// loss within the documented flush window (see ``TinyStorage/synchronize()``). Records
        /// found after such damage are set aside, never applied, so what the store holds is a
        /// prefix of the commit order.
        public let isInterruptedWrite: Bool
        /// `true` when data known to be durable was damaged or is missing: bytes before the
        /// file's durable mark (what a flush had confirmed), or commits acknowledged during this
        /// boot. Never the result of a crash or a power loss; a failing disk, a partial copy or
        /// a restore, another program writing into the file. The next throwing call on the store
        /// reported it as `.corrupted`, once.
        public let isDataLoss: Bool
        /// Records that verified but were not applied, because they came after damage in the part
        /// of the file not yet known to be durable (a newer commit is never applied without an
        /// older one). They are in the quarantine copy.
        public let setAsideRecordCount: Int

        init(
            date: Date, error: TinyStorageError, damagedRanges: [Range<Int>], recoveredRecordCount: Int,
            possiblyAffectedKeys: [String], quarantineURL: URL, isInterruptedWrite: Bool, isDataLoss: Bool = false,
            setAsideRecordCount: Int = 0
        ) {
            self.date = date
            self.error = error
            self.damagedRanges = damagedRanges
            self.recoveredRecordCount = recoveredRecordCount
            self.possiblyAffectedKeys = possiblyAffectedKeys
            self.quarantineURL = quarantineURL
            self.isInterruptedWrite = isInterruptedWrite
            self.isDataLoss = isDataLoss
            self.setAsideRecordCount = setAsideRecordCount
        }

        /// The number of damaged bytes.
        public var damagedByteCount: Int { damagedRanges.reduce(0) { $0 + $1.count } }

        public var description: String {
            var text =
                isInterruptedWrite
                ? "Recovered from an interrupted write: \(damagedByteCount) bytes at the end of the file were incomplete."
                : isDataLoss
                    ? "Data known to be durable was damaged or is missing: \(damagedByteCount) bytes in "
                        + "\(damagedRanges.count) place(s); \(recoveredRecordCount) verified records were kept."
                    : "Recovered a damaged store: \(damagedByteCount) bytes in \(damagedRanges.count) place(s) failed "
                        + "verification; \(recoveredRecordCount) verified records were kept."
            if setAsideRecordCount > 0 {
                text +=
                    " \(setAsideRecordCount) later record(s) that came after the damage were set aside, not applied."
            }
            if !possiblyAffectedKeys.isEmpty {
                text += " Possibly affected keys: \(possiblyAffectedKeys.sorted().joined(separator: ", "))."
            }
            return text + " The damaged bytes were copied to \(quarantineURL.path)."
        }
    }

    /// The damage found and set aside since this instance opened the store, oldest first.
    ///
    /// Empty for a healthy store. Check it after launch to tell a user (or your crash reporter)
    /// that some recent changes may be missing.
    public var recoveryReports: [RecoveryReport] {
        engine.state.withLock { $0.recovery.reports }
    }
}
