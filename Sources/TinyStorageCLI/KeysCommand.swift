// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import ArgumentParser

/// `tinystorage keys <store-dir>`
struct KeysCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "List a store's keys, one per line, sorted.",
        discussion: """
            Prints nothing for an empty store. Never creates a store or writes a value.

            EXAMPLE:
              tinystorage keys ~/.local/share/MyApp/settings
            """
    )

    @OptionGroup var store: StoreArgument

    func execute() throws(CLIError) {
        let entries = try store.directory.readEntries()
        Console.write(entries.keys.sorted().map { $0 + "\n" }.joined())
    }
}

#endif
