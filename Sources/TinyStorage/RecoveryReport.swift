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
        /// `true` when the only damage was an incomplete last record: a write interrupted by a
        /// crash or power loss before it returned, so no acknowledged write was lost.
        public let isInterruptedWrite: Bool

        /// The number of damaged bytes.
        public var damagedByteCount: Int { damagedRanges.reduce(0) { $0 + $1.count } }

        public var description: String {
            var text =
                isInterruptedWrite
                ? "Recovered from an interrupted write: \(damagedByteCount) bytes at the end of the file were incomplete."
                : "Recovered a damaged store: \(damagedByteCount) bytes in \(damagedRanges.count) place(s) failed "
                    + "verification; \(recoveredRecordCount) verified records were kept."
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
        engine.state.withLock { $0.recoveries }
    }
}
