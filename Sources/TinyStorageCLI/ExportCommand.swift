// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import ArgumentParser

/// `tinystorage export <store-dir>`
struct ExportCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Print the whole store as one JSON object, values exactly as stored.",
        discussion: """
            One key per line, sorted; each value is the stored JSON byte for byte, so `import` \
            restores exactly the same bytes. Never creates a store or writes a value.

            EXAMPLES:
              tinystorage export ./settings > settings.json
              tinystorage export ./settings | tinystorage import ./settings-copy -
            """
    )

    @OptionGroup var store: StoreArgument

    func execute() throws(CLIError) {
        let entries = try store.directory.readEntries()
        Console.write(JSONText.exportObject(entries))
    }
}

#endif
