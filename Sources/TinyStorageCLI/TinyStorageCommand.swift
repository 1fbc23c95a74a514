// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import ArgumentParser
import TinyStorage

/// `tinystorage`: look at and edit a TinyStorage store from the shell, like `defaults` on macOS.
@main
struct TinyStorageCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tinystorage",
        abstract: "Read, edit, watch and check a TinyStorage store from the command line.",
        discussion: """
            A store is a directory, such as ~/.local/share/MyApp/settings, that holds \
            store.tinystorage (the data) and store.lock. Pass that directory to every command. \
            Values are JSON. Data goes to standard output; errors go to standard error as one line \
            starting with "error:".

            keys, read, export, info and verify only read: they read the data file once and change \
            nothing, not even store.lock, so they are safe on a damaged store and work on a store \
            you may read but not write, as another user's. watch opens the store read-only: it \
            changes nothing either, and needs a store some program that may write it has opened. \
            write, import and import-userdefaults create a new store when the directory does not \
            exist yet (its parent must) or is empty. delete, compact and backup need an existing \
            store; like any program that opens a store to write it, they need to write store.lock, \
            and run TinyStorage's crash recovery, which sets damaged bytes aside in quarantine/.

            EXIT CODES:
              0   Success (verify: the store is healthy).
              1   The key is not in the store (import-userdefaults: a --require key is
                  not in the source).
              3   The path is not a store (for write and import: it cannot become one).
              4   The store cannot be read: this user may not read it or reach its
                  folder, or its file is unreadable, has a damaged header, or is from a
                  newer TinyStorage. It is left untouched.
              5   Invalid input: JSON, key, value size, import file, plist or suite.
              6   The store could not be changed: this user may read it but not write
                  it (or may not create it there), the disk is full, or an I/O error.
              7   The store is damaged. verify: bytes fail verification. read <key>:
                  the damaged bytes may have held the key, so its value (or whether it
                  is there at all) cannot be told; nothing is printed.
              8   verify: the only damage is an interrupted last write; nothing
                  acknowledged was lost.
              9   The store is not safe to use: a link, FIFO, directory or another
                  user's file is at one of its names, or other users may write to its
                  folder. Nothing was read or changed; remove what is there, or
                  chmod go-w the folder.
              64  Usage error: no command, or a missing, extra or unknown argument or
                  option.
              70  demo: a demonstration did not show what it should (please report it).
              74  Standard output could not be written (a full disk, say); what was
                  printed is incomplete.

            EXAMPLES:
              tinystorage write ./settings streak 365
              tinystorage read ./settings streak
              tinystorage watch ./settings
              tinystorage verify ./settings
              tinystorage demo
            """,
        version: TinyStorage.version,
        subcommands: [
            KeysCommand.self, ReadCommand.self, WriteCommand.self, DeleteCommand.self,
            ExportCommand.self, ImportCommand.self, InfoCommand.self, WatchCommand.self,
            VerifyCommand.self, CompactCommand.self, BackupCommand.self, ImportUserDefaultsCommand.self,
            DemoCommand.self,
            DemoChildCommand.self,
        ]
    )

    /// `tinystorage` alone: one `error:` line naming the commands, and the usage exit code.
    func run() throws {
        // NB: closures, not key paths: a key path through the metatypes crashes Swift 6.3's SILGen.
        let commands = Self.configuration.subcommands.filter { $0.configuration.shouldDisplay }
            .map { $0._commandName }.joined(separator: ", ")
        Console.error(
            "no command given. Usage: tinystorage <command> <store-dir> [<arguments>], where <command> is one of "
                + "\(commands); 'tinystorage --help' explains them and the exit codes.")
        throw ExitCode(CommandLineUsage.usageExitCode)
    }

    /// Parses and runs the command, reporting a usage error as one `error:` line.
    static func main() {
        CommandLineUsage.main(Self.self)
    }
}

#endif
