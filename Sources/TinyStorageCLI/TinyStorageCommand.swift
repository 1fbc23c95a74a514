import ArgumentParser

/// `tinystorage`: look at and edit a TinyStorage store from the shell, like `defaults` on macOS.
@main
struct TinyStorageCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tinystorage",
        abstract: "Read and edit a TinyStorage store from the command line.",
        discussion: """
            A store is a directory, such as ~/.local/share/MyApp/settings, that holds \
            store.tinystorage (the data) and store.lock. Pass that directory to every command. \
            Values are JSON. Data goes to standard output; errors go to standard error as one line \
            starting with "error:".

            keys, read, export and info never create a store and never write a value. (Opening a \
            store runs TinyStorage's crash recovery, which sets damaged bytes aside in quarantine/, \
            and creates store.lock if it is missing.) write and import create a new store when \
            the directory does not exist yet (its parent must) or is empty.

            EXIT CODES:
              0   Success.
              1   The key is not in the store.
              3   The path is not a store (for write and import: it cannot become one).
              4   The store exists but cannot be read now: unreadable, damaged, or from
                  a newer TinyStorage. It is left untouched.
              5   Invalid input: JSON, key, value size, or import file.
              6   The store was read but writing to it failed: disk full, permissions, I/O.
              64  Usage error: a missing, extra or unknown argument or option.

            EXAMPLES:
              tinystorage write ./settings streak 365
              tinystorage read ./settings streak
              tinystorage keys ./settings
            """,
        subcommands: [
            KeysCommand.self, ReadCommand.self, WriteCommand.self, DeleteCommand.self,
            ExportCommand.self, ImportCommand.self, InfoCommand.self,
        ]
    )
}
