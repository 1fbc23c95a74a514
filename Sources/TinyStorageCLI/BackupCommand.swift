// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import ArgumentParser
import Foundation
import TinyStorage

/// `tinystorage backup <store-dir> <backup-dir>`
struct BackupCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Write a consistent copy of a store, safe to take while programs use it.",
        discussion: """
            Writes what the store held at one moment between two commits (every other program's \
            commits included) as a new store directory: one data file, flushed, read back and \
            verified, then renamed into place, so an interrupted backup leaves no half copy. \
            <backup-dir> must not hold a store yet; it is created (and its parents) when missing. \
            The store is not changed, and no program using it waits for the copy.

            Copying a store directory that is in use with cp, rsync or a backup tool instead takes \
            its files at different moments: TinyStorage reads every record of such a copy that \
            verifies, but commits made while it was copied may be missing from it.

            To restore a backup, quit every program that has the store open, then put the backup \
            directory in the store directory's place.

            EXAMPLE:
              tinystorage backup ./settings ./settings-2026-11-28
            """
    )

    @OptionGroup var store: StoreArgument

    @Argument(
        help: ArgumentHelp("Where to write the copy: a directory that holds no store yet.", valueName: "backup-dir"))
    var destination: String

    func execute() throws(CLIError) {
        let directory = store.directory
        let target = StoreDirectory(destination)
        if case .store = target.currentState() {
            throw CLIError(.invalidInput, "'\(destination)' already holds a store; back up into a new directory.")
        }
        let storage = try directory.openForWriting(mayCreate: false)
        do {
            try storage.backup(to: target.url)
        } catch let error as TinyStorageError {
            switch error.code {
            case .unavailable, .corrupted, .unsupportedFormat: throw directory.writeFailure(error)
            case .unsafeFile: throw CLIError(.unsafe, error.message)
            case .invalidName: throw CLIError(.invalidInput, error.message)
            default:
                throw CLIError(
                    .writeFailed, "writing the backup '\(destination)' failed (\(error.code)): \(error.message)")
            }
        } catch {
            throw CLIError(.writeFailed, "writing the backup '\(destination)' failed: \(error)")
        }
        let keys = (try? TinyStorage.inspect(storeDirectory: target.url).entries.count) ?? 0
        Console.write("backed up '\(directory.path)' to '\(destination)' (\(keys) keys, verified)\n")
    }
}

#endif
