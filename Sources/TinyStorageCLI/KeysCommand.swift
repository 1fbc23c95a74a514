// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import ArgumentParser
import TinyStorage

/// `tinystorage keys <store-dir> [--expiring]`
struct KeysCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "List a store's keys, one per line, sorted.",
        discussion: """
            Prints nothing for an empty store. Never creates a store or writes a value. Keys whose \
            values have expired are not listed: they read as absent, even while their bytes wait \
            in the data file for a compaction.

            With --expiring, lists only the keys whose values expire, soonest first, each followed \
            by a tab and when it expires (UTC, to the millisecond, as the store keeps it).

            EXAMPLES:
              tinystorage keys ~/.local/share/MyApp/settings
              tinystorage keys ./settings --expiring
            """
    )

    @OptionGroup var store: StoreArgument

    @Flag(help: "List only the keys whose values expire, soonest first, with when they expire.")
    var expiring = false

    func execute() throws(CLIError) {
        let entries = try store.directory.readEntries()
        guard expiring else {
            Console.write(entries.keys.sorted().map { $0 + "\n" }.joined())
            return
        }
        let deadlines = entries.compactMap { entry in entry.value.deadline.map { (key: entry.key, deadline: $0) } }
            .sorted { $0.deadline != $1.deadline ? $0.deadline < $1.deadline : $0.key < $1.key }
        Console.write(deadlines.map { "\($0.key)\t\(ExpirationText.timestamp($0.deadline))\n" }.joined())
    }
}

#endif
