// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import ArgumentParser
import Foundation
import TinyStorage

/// `tinystorage compact <store-dir>`
struct CompactCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "compact",
        abstract: "Rewrite a store's data file with only its current values.",
        discussion: """
            The data file is a log: every write appends, so a key written many times takes room for \
            each write. TinyStorage compacts by itself when the log holds much more than the live \
            data; this does it now, whatever the size, and prints the sizes before and after.

            The new file is written and synced beside the old one, then renamed over it, so a \
            crash at any moment leaves either the old file or the new one, never a mix. Programs \
            that have the store open carry on and reload. Values and keys do not change. Opening \
            the store runs TinyStorage's crash recovery first, like any program that opens it.

            EXAMPLE:
              tinystorage compact ./settings
            """
    )

    @OptionGroup var store: StoreArgument

    func execute() throws(CLIError) {
        let directory = store.directory
        let before = try usage(of: directory)
        let storage = try directory.openForWriting(mayCreate: false)
        do {
            try storage.compactNow()
        } catch {
            throw directory.writeFailure(error)
        }
        let after = try usage(of: directory)
        Console.write(
            """
            compacted '\(directory.path)' (\(after.keys) keys, values unchanged)
              before: \(before.used) bytes of records in a \(before.fileSize)-byte file
              after:  \(after.used) bytes of records in a \(after.fileSize)-byte file

            """)
    }

    /// The file's size, the bytes its records use (the rest is space reserved for later
    /// commits), and the number of keys.
    private func usage(of directory: StoreDirectory) throws(CLIError) -> (fileSize: Int, used: Int, keys: Int) {
        guard let inspection = try directory.inspection() else { return (0, 0, 0) }
        if let problem = inspection.headerProblem { throw directory.unreadableHeader(problem) }
        return (inspection.fileSize, inspection.logicalEnd, inspection.entries.count)
    }
}

#endif
