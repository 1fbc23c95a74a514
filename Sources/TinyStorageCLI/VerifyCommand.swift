// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import ArgumentParser
import Foundation
import TinyStorage

/// `tinystorage verify <store-dir>`
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check every record of a store and report any damage.",
        discussion: """
            Reads the data file once, checks its header and the checksum of every record, and \
            prints a report: the header, how many records verify, how many keys they hold, every damaged \
            byte range with its offset and length, the keys the damaged bytes held (at risk: their \
            values may be older than they should be, or missing), and the files in quarantine/. \
            Changes nothing, \
            not even store.lock, so it is safe to run on a damaged store before you copy it.

            Exits with 0 when the store is healthy, 7 when bytes fail verification (the next \
            program that opens the store keeps every record that verifies and sets the rest aside \
            in quarantine/), and 8 when the only damage is an incomplete last record: a write that \
            was interrupted (crash, kill, power loss) before it returned, so nothing acknowledged \
            was lost.

            EXAMPLES:
              tinystorage verify ./settings
              tinystorage verify ./settings || cp -R ./settings ./settings-damaged
            """
    )

    @OptionGroup var store: StoreArgument

    func run() throws {
        let outcome: Outcome
        do {
            outcome = try verify()
        } catch {
            Console.error(error.message)
            throw ExitCode(error.kind.rawValue)
        }
        if outcome != .healthy { throw ExitCode(outcome.rawValue) }
    }

    /// How `verify` ends; the raw values are exit codes, listed in the root command's help.
    enum Outcome: Int32 {
        case healthy = 0
        case damaged = 7
        case interruptedWrite = 8
    }

    private func verify() throws(CLIError) -> Outcome {
        let directory = store.directory
        var report = Report()
        report.add("store", directory.url.path)
        if directory.currentState() == .original {
            let entries = try directory.originalEntries()
            report.add("format", "the original TinyStorage's \(StoreDirectory.originalFileName), not adopted yet")
            report.add("keys", "\(entries.count)")
            report.add(
                "result",
                "healthy: readable. The first program that opens the store imports these keys in one commit "
                    + "and leaves the original file in place.")
            Console.write(report.text)
            return .healthy
        }
        guard let inspection = try directory.inspection() else {
            report.add("data file", "\(directory.dataFileURL.path) (0 bytes)")
            report.add("header", "none yet: the store's creation has not written it; the store holds no keys")
            report.add("result", "healthy")
            Console.write(report.text)
            return .healthy
        }
        report.add("data file", "\(inspection.path) (\(inspection.fileSize) bytes)")
        if let problem = inspection.headerProblem {
            let header = HeaderProblem(problem)
            report.add("header", "DAMAGED: \(header.explanation)")
            if header.code == "unsupportedFormat" {
                Console.write(report.text)
                throw directory.unreadableHeader(problem)
            }
        } else {
            report.add(
                "header",
                "ok: format version \(inspection.formatVersion ?? 0), generation \(inspection.generation ?? 0)")
        }
        var records = "\(inspection.recordCount) verified"
        if inspection.damagedRanges.isEmpty && inspection.headerProblem == nil {
            records += ", ending at offset \(inspection.logicalEnd)"
            if inspection.fileSize > inspection.logicalEnd {
                records +=
                    "; the \(inspection.fileSize - inspection.logicalEnd) bytes after it are zeros reserved for later writes"
            }
        }
        report.add("records", records)
        report.add("keys", "\(inspection.entries.count)")
        addDamage(of: inspection, to: &report)
        if inspection.quarantineFiles.isEmpty {
            report.add("quarantine", "none")
        } else {
            let folder = directory.url.appendingPathComponent("quarantine", isDirectory: true).path
            report.add(
                "quarantine", "\(inspection.quarantineFiles.count) file(s) in \(folder)", inspection.quarantineFiles)
        }
        let outcome = Self.outcome(of: inspection)
        report.add("result", Self.verdict(outcome, inspection))
        Console.write(report.text)
        return outcome
    }

    private func addDamage(of inspection: StoreInspection, to report: inout Report) {
        let ranges = inspection.damagedRanges
        guard !ranges.isEmpty else {
            report.add("damage", "none")
            return
        }
        let bytes = ranges.reduce(0) { $0 + $1.count }
        let lines = ranges.map { "at offset \($0.lowerBound): \($0.count) bytes (\($0.lowerBound)..<\($0.upperBound))" }
        report.add("damage", "\(bytes) bytes in \(ranges.count) place(s)", lines)
        guard !inspection.isOnlyInterruptedWrite else { return }
        let keys = inspection.possiblyAffectedKeys
        if keys.isEmpty {
            report.add(
                "at risk",
                "any key: the damaged bytes name none, so any value may be older than it should be, or missing")
        } else {
            report.add(
                "at risk", keys.map(JSONText.quoted).joined(separator: ", "),
                ["the damaged bytes held these keys: their values may be older than they should be, or missing"])
        }
    }

    static func outcome(of inspection: StoreInspection) -> Outcome {
        if inspection.isHealthy { return .healthy }
        return inspection.isOnlyInterruptedWrite ? .interruptedWrite : .damaged
    }

    private static func verdict(_ outcome: Outcome, _ inspection: StoreInspection) -> String {
        switch outcome {
        case .healthy:
            return "healthy"
        case .interruptedWrite:
            return "INTERRUPTED WRITE: the last record is incomplete, left by a write that never returned (a "
                + "crash, a kill or a power cut), so nothing acknowledged was lost. The next program that opens "
                + "the store sets those bytes aside in quarantine/."
        case .damaged where inspection.headerProblem != nil:
            return "DAMAGED: TinyStorage will not open this store; it stays unavailable and untouched. Keep a "
                + "copy, and restore the file from a backup."
        case .damaged:
            return "DAMAGED: the keys above are what verifies. Copy the store now if you want to study the damage: "
                + "the next program that opens it keeps every record that verifies, copies the damaged bytes to "
                + "quarantine/, and reports the recovery."
        }
    }
}

/// Aligned `label: value` lines, with optional indented detail lines under a value.
struct Report {
    private var lines: [String] = []

    mutating func add(_ label: String, _ value: String, _ details: [String] = []) {
        let padded = (label + ":").padding(toLength: 13, withPad: " ", startingAt: 0)
        lines.append(padded + value)
        lines += details.map { String(repeating: " ", count: 15) + $0 }
    }

    var text: String { lines.map { $0 + "\n" }.joined() }
}

#endif
