// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import ArgumentParser
import TinyStorage

/// `tinystorage delete <store-dir> <key> [--ignore-missing]`
struct DeleteCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Remove a key and its value.",
        discussion: """
            Removes the key in one atomic commit that is on disk when the command returns. Exits \
            with 1, writing nothing, when the key is not in the store (0 with --ignore-missing). \
            Never creates a store. Prints nothing on success.

            EXAMPLES:
              tinystorage delete ./settings streak
              tinystorage delete ./settings old-flag --ignore-missing
            """
    )

    @OptionGroup var store: StoreArgument

    @Argument(help: "The key to remove.")
    var key: String

    @Flag(help: "Succeed when the key is not in the store.")
    var ignoreMissing = false

    func execute() throws(CLIError) {
        try validateKey(key)
        let directory = store.directory
        let storage = try directory.openForWriting(mayCreate: false)
        let removed: Bool
        do {
            removed = try storage.removeOrThrow(key: key)
        } catch {
            throw directory.writeFailure(error)
        }
        if !removed && !ignoreMissing {
            throw CLIError(
                .notFound,
                "no key \(JSONText.quoted(key)) in the store '\(directory.path)'; nothing was written. "
                    + "Add --ignore-missing to accept that.")
        }
    }
}

#endif
