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
            restores exactly the same bytes. Values that are not plain JSON — Data values, and \
            values adopted from the original TinyStorage — are listed in a last member, \
            "$tinystorage.kinds" (Data values are written in base64), so `import` restores their \
            bytes and kinds too. Values that have expired are left out; values that expire are \
            exported as their values alone, so `import` stores them without a deadline (`keys \
            --expiring` lists the deadlines). Never creates a store or writes a value.

            EXAMPLES:
              tinystorage export ./settings > settings.json
              tinystorage export ./settings | tinystorage import ./settings-copy -
            """
    )

    @OptionGroup var store: StoreArgument

    func execute() throws(CLIError) {
        let entries = try store.directory.readEntries()
        Console.write(try ExportFormat.text(of: entries))
    }
}

#endif
