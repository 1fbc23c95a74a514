// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import ArgumentParser
import TinyStorage

/// The `<store-dir>` argument every subcommand takes first.
struct StoreArgument: ParsableArguments {
    @Argument(
        help: ArgumentHelp(
            "The store directory: the folder that holds store.tinystorage.", valueName: "store-dir"))
    var path: String

    var directory: StoreDirectory { StoreDirectory(path) }
}

/// Checks a key against the library's rules before anything is opened, so a bad key never
/// creates a store. The library checks again; this only makes the failure early and clear.
func validateKey(_ key: String) throws(CLIError) {
    if key.isEmpty {
        throw CLIError(.invalidInput, "invalid key '': a key must not be empty.")
    }
    if key.utf8.contains(0) {
        throw CLIError(.invalidInput, "invalid key: a key must not contain a NUL character.")
    }
    if key.utf8.count > TinyStorage.maximumKeyLength {
        throw CLIError(
            .invalidInput,
            "invalid key: it is \(key.utf8.count) bytes long; the limit is \(TinyStorage.maximumKeyLength).")
    }
}

#endif
