// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import ArgumentParser
import Foundation
import TinyStorage

/// `tinystorage info <store-dir>`
struct InfoCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Describe a store: its files, format, keys, size and whether it can be read.",
        discussion: """
            The data file's size includes space reserved ahead of the next commits and older records \
            compaction has not removed yet; the live data line says what a compacted file would take, \
            and the largest line names the three keys with the largest values (as JSON strings). \
            For a store holding values that expire, the expiring line says how many do and when the \
            next one does, and the expired line how many have, whose bytes the next compaction \
            removes (neither line is shown otherwise; the keys line counts only values that have \
            not expired). The damage line \
            says whether any bytes failed verification (`verify` says where); the quarantine line, \
            where TinyStorage kept damaged bytes it set aside before. For a store that cannot be \
            read, prints what it can, then the reason as an error, and exits with 4. Reads the data \
            file once and changes nothing, not even store.lock.

            EXAMPLE:
              tinystorage info ./settings
            """
    )

    @OptionGroup var store: StoreArgument

    /// How many of the largest keys the "largest" line names.
    static let largestKeysShown = 3

    /// `key` as a JSON string: quoted, its control characters escaped, so any key prints on one line.
    private func quoted(_ key: String) -> String {
        (try? JSONEncoder().encode(key)).map { String(decoding: $0, as: UTF8.self) } ?? key
    }

    /// The expiring and expired lines, for a store that holds values that expire, or did.
    static func expiryLines(of inspection: StoreInspection) -> [String] {
        var lines: [String] = []
        let expiring = inspection.entries.compactMap { entry in entry.value.deadline.map { (entry.key, $0) } }
        if let next = expiring.min(by: { $0.1 != $1.1 ? $0.1 < $1.1 : $0.0 < $1.0 }) {
            let remaining = ExpirationText.remaining(until: next.1, from: inspection.readAt)
            lines.append(
                "expiring:    \(keysText(expiring.count)), the next \(JSONText.quoted(next.0)) at "
                    + "\(ExpirationText.timestamp(next.1)) (\(remaining))")
        }
        if !inspection.expiredKeys.isEmpty {
            lines.append(
                "expired:     \(keysText(inspection.expiredKeys.count)), read as absent; the next compaction removes "
                    + "their bytes")
        }
        return lines
    }

    private static func keysText(_ count: Int) -> String { count == 1 ? "1 key" : "\(count) keys" }

    func execute() throws(CLIError) {
        let directory = store.directory
        let state = directory.currentState()
        if state == .original {
            let entries = try directory.originalEntries()
            Console.write(
                """
                store:       \(directory.url.path)
                format:      the original TinyStorage's \(StoreDirectory.originalFileName), not adopted yet
                keys:        \(entries.count)
                available:   yes; the first program that opens the store imports these keys

                """)
            return
        }
        guard case .store(let size) = state else { throw directory.notAStore(state) }
        var lines = [
            "store:       \(directory.url.path)",
            "data file:   \(directory.dataFileURL.path)" + (size >= 0 ? " (\(size) bytes)" : ""),
        ]
        let inspection: StoreInspection?
        do {
            inspection = try directory.inspection()
        } catch {
            lines += ["keys:        unknown", "available:   no"]
            Console.write(lines.map { $0 + "\n" }.joined())
            throw error
        }
        guard let inspection else {
            lines += ["format:      none yet (the store's creation has not written its header)", "keys:        0"]
            lines.append("available:   yes")
            Console.write(lines.map { $0 + "\n" }.joined())
            return
        }
        if let problem = inspection.headerProblem {
            lines += ["format:      unknown (\(HeaderProblem(problem).explanation))"]
        } else if let version = inspection.formatVersion {
            lines += ["format:      version \(version), generation \(inspection.generation ?? 0)"]
        }
        if !inspection.quarantineFiles.isEmpty {
            let quarantine = directory.url.appendingPathComponent("quarantine", isDirectory: true)
            lines.append("quarantine:  \(inspection.quarantineFiles.count) file(s) in \(quarantine.path)")
        }
        if let problem = inspection.headerProblem {
            lines += ["keys:        unknown", "available:   no"]
            Console.write(lines.map { $0 + "\n" }.joined())
            throw directory.unreadableHeader(problem)
        }
        let damaged = inspection.damagedRanges.reduce(0) { $0 + $1.count }
        if inspection.damagedRanges.isEmpty {
            lines.append("damage:      none")
        } else if inspection.isOnlyInterruptedWrite {
            lines.append(
                "damage:      an interrupted last write (\(damaged) bytes), ignored; nothing acknowledged was lost")
        } else {
            lines.append(
                "damage:      \(damaged) bytes in \(inspection.damagedRanges.count) place(s) failed verification; "
                    + "`tinystorage verify` says where")
        }
        let statistics = inspection.statistics
        lines += [
            "keys:        \(statistics.keyCount)",
            "live data:   \(statistics.liveBytes) bytes (what the data file would take compacted)",
        ]
        if !statistics.largestKeys.isEmpty {
            let largest = statistics.largestKeys.prefix(Self.largestKeysShown).map {
                "\(quoted($0.key)) \($0.bytes) bytes"
            }
            lines.append("largest:     " + largest.joined(separator: ", "))
        }
        lines += Self.expiryLines(of: inspection)
        lines.append("available:   yes")
        Console.write(lines.map { $0 + "\n" }.joined())
    }
}

#endif
