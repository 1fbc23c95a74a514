// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import Foundation
import TinyStorage

// Reading a store without changing it: `keys`, `read`, `export`, `info` and `verify` never open
// the store through `TinyStorage`, because opening creates `store.lock` when it is missing and
// runs crash recovery, which moves damaged bytes to `quarantine/` and rewrites the data file. A
// tool you run to look at a damaged store must not repair it behind your back, and must work on
// a store you may read but not write. They read the data file once, without a lock, through
// `TinyStorage.inspect(storeDirectory:)`.
//
// NB: reading without the lock is safe because the file is append-only and compaction replaces
// it by rename: a reader sees every commit that was complete when it read, and at worst the
// incomplete tail of a commit in progress, which fails verification and is ignored like a torn
// write.
extension StoreDirectory {
    /// What the data file holds, read once without creating, locking or changing anything.
    ///
    /// - Returns: `nil` for a zero-byte data file: a store whose creation has not written its
    ///   header yet, which holds no keys.
    /// - Throws: `.notAStore`, `.unavailable` (the file cannot be read).
    func inspection() throws(CLIError) -> StoreInspection? {
        let state = currentState()
        guard case .store = state else { throw notAStore(state) }
        // NB: even an empty data file goes through the library, which checks that it is a file
        // the store may use (a FIFO, say, also has no bytes).
        let inspection: StoreInspection
        do {
            inspection = try TinyStorage.inspect(storeDirectory: url)
        } catch {
            throw unavailable(error)
        }
        return inspection.fileSize == 0 ? nil : inspection
    }

    /// Every key and its stored value, from the records that verify.
    ///
    /// Damage other than an interrupted last write is mentioned once on standard error; the keys
    /// shown are then the ones TinyStorage itself will recover when it next opens the store.
    ///
    /// - Parameter key: The one key the caller will answer about, if any. When the damaged bytes
    ///   may have held it, what verifies cannot answer for it, and this throws instead.
    /// - Throws: `.notAStore`, `.unavailable` (unreadable file, or a header that does not verify),
    ///   `.damaged` (the damage may have hit `key`).
    func readEntries(answering key: String? = nil) throws(CLIError) -> [String: StoredValue] {
        if currentState() == .original { return try originalEntries() }
        guard let inspection = try inspection() else { return [:] }
        if let problem = inspection.headerProblem { throw unreadableHeader(problem) }
        if let key, Self.damage(in: inspection, mayHaveHit: key) { throw cannotTell(key, inspection) }
        if !inspection.damagedRanges.isEmpty && !inspection.isOnlyInterruptedWrite {
            let bytes = inspection.damagedRanges.reduce(0) { $0 + $1.count }
            Console.note(
                "\(bytes) bytes of the store '\(path)' failed verification; only what verifies is shown. "
                    + "`tinystorage verify '\(path)'` says where.",
                prefix: "warning")
        }
        return inspection.entries
    }

    /// Whether damage other than an interrupted last write may have hit `key`: its bytes name it,
    /// or name no key at all (the library's rule for reporting a loss, `TinyStorage+DataLoss.swift`).
    static func damage(in inspection: StoreInspection, mayHaveHit key: String) -> Bool {
        guard !inspection.damagedRanges.isEmpty, !inspection.isOnlyInterruptedWrite else { return false }
        return inspection.possiblyAffectedKeys.isEmpty || inspection.possiblyAffectedKeys.contains(key)
    }

    /// The error for a key the damage may have hit: neither its value nor its absence can be told.
    private func cannotTell(_ key: String, _ inspection: StoreInspection) -> CLIError {
        let bytes = inspection.damagedRanges.reduce(0) { $0 + $1.count }
        let held =
            inspection.possiblyAffectedKeys.isEmpty
            ? "the damaged bytes name no key, so they may have held it"
            : "the damaged bytes held it"
        let verified =
            inspection.entries[key] == nil
            ? "what verifies holds no value for it"
            : "what verifies holds a value for it that may be older than it should be"
        return CLIError(
            .damaged,
            "cannot tell the value of \(JSONText.quoted(key)): the store '\(path)' is damaged (\(bytes) bytes fail "
                + "verification), \(held), and \(verified). `tinystorage verify '\(path)'` shows the damage; "
                + "`tinystorage export '\(path)'` prints what verifies.")
    }

    /// The values of an original TinyStorage store not adopted yet: its `tiny-storage.plist` holds
    /// each key's bytes (JSON, or a `Data` value's raw bytes), exactly what this TinyStorage will
    /// import, as original values.
    ///
    /// - Throws: `.unavailable` when the file cannot be read or is not such a plist.
    func originalEntries() throws(CLIError) -> [String: StoredValue] {
        let file = url.appendingPathComponent(Self.originalFileName).path
        guard let data = FileManager.default.contents(atPath: file) else {
            throw CLIError(
                .unavailable, "the store '\(path)' cannot be read: \(file) is not readable. Check its permissions.")
        }
        guard let object = try? PropertyListSerialization.propertyList(from: data, options: [], format: nil),
            let entries = object as? [String: Data]
        else {
            throw CLIError(
                .unavailable,
                "the store '\(path)' cannot be read (corrupted): \(file) is not the original TinyStorage's "
                    + "dictionary of values. Nothing was changed.")
        }
        return entries.mapValues { StoredValue($0, kind: .original) }
    }

    /// The error for a data file whose header does not verify.
    func unreadableHeader(_ problem: String) -> CLIError {
        let header = HeaderProblem(problem)
        return CLIError(
            .unavailable,
            "the store '\(path)' cannot be read (\(header.code)): \(header.explanation). Nothing was changed; "
                + "`tinystorage verify '\(path)'` shows the details.")
    }
}

/// A header problem reported by `TinyStorage.inspect`, in words.
struct HeaderProblem {
    /// The `TinyStorageError` code TinyStorage reports for it: `corrupted` or `unsupportedFormat`.
    let code: String
    /// What is wrong, as a sentence fragment.
    let explanation: String

    init(_ problem: String) {
        switch problem {
        case "truncated":
            code = "corrupted"
            explanation = "the data file is shorter than its header"
        case "notAStoreFile":
            code = "corrupted"
            explanation = "the data file does not start with TinyStorage's header, so it is not a store file"
        case "damaged":
            code = "corrupted"
            explanation = "the data file's header fails its checksum"
        default:
            if problem.hasPrefix("newerVersion(") {
                let version = problem.dropFirst("newerVersion(".count).dropLast()
                code = "unsupportedFormat"
                explanation =
                    "the data file was written by a newer TinyStorage (format version \(version)); "
                    + "use a newer tinystorage to read it"
            } else {
                code = "corrupted"
                explanation = "the data file's header does not verify (\(problem))"
            }
        }
    }
}

#endif
