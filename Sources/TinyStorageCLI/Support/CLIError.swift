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
        /// The store exists but cannot be read right now (see `TinyStorage.availability`).
        case unavailable = 4
        /// Bad input: invalid JSON, an invalid key, a value that is too large, an unreadable file.
        case invalidInput = 5
        /// The store was readable but the write failed (disk full, permissions, I/O error).
        case writeFailed = 6
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
