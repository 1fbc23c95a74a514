// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import ArgumentParser

/// A failure the tool reports as one line on standard error, with its own exit code.
///
/// The codes are part of the tool's interface (scripts test them) and are listed in the root
/// command's help; never renumber one.
struct CLIError: Error {
    /// What kind of failure, which decides the exit code.
    enum Kind: Int32, CaseIterable {
        /// The key is not in the store.
        case notFound = 1
        /// The path is not a store directory (and, for `write`/`import`, cannot become one).
        case notAStore = 3
        /// The store cannot be read: this user may not read it or reach its folder, or its file is
        /// unreadable, has a damaged header or a newer format (see `TinyStorage.availability`).
        case unavailable = 4
        /// Bad input: invalid JSON, an invalid key, a value that is too large, an unreadable file.
        case invalidInput = 5
        /// The store could not be changed: this user may read but not write it (or not create it
        /// there), the disk is full, or an I/O error.
        case writeFailed = 6
        /// The store is damaged, and what was asked for may have been in the damaged bytes: the
        /// answer cannot be told (never "not in the store", which a script takes for absent).
        case damaged = 7
        /// A link, a FIFO, a directory or another user's file is at one of the store's names, or
        /// other users may write to the store's folder (`unsafeFile`): nothing was read or changed.
        case unsafe = 9
    }

    let kind: Kind
    /// One sentence or two, without the `error: ` prefix and without a trailing newline.
    let message: String

    init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }
}

/// A subcommand whose failures are ``CLIError``s.
///
/// Conforming commands implement ``execute()``; the shared `run()` prints a failure as
/// `error: <message>` on standard error and exits with the failure's code, so no command can
/// forget either half, and no Swift error description or stack trace ever reaches the user.
protocol StoreCommand: ParsableCommand {
    func execute() throws(CLIError)
}

extension StoreCommand {
    func run() throws {
        do {
            try execute()
        } catch {
            Console.error(error.message)
            throw ExitCode(error.kind.rawValue)
        }
    }
}

#endif
