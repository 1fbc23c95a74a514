// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import ArgumentParser
import Foundation
import TinyStorage

/// `tinystorage write <store-dir> <key> <value> [--string | --data] [--expires-after <seconds>]`
struct WriteCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "write",
        abstract: "Store a JSON value for a key.",
        usage: "tinystorage write <store-dir> <key> <value> [--string | --data] [--expires-after <seconds>]",
        discussion: """
            The value must be valid JSON: 365, true, null, "text" (with the quotes, so '"text"' in \
            the shell), [1, 2] or {"a": 1}. It is stored as typed, without the surrounding \
            whitespace, in one atomic commit that is on disk when the command returns. With \
            --string, the value is stored as a JSON string and needs no quotes. With --data, the \
            value is base64 and its bytes are stored as a Data value, what an app's \
            `store(data, forKey:)` stores and `retrieve(type: Data.self, forKey:)` reads. Invalid \
            JSON, invalid base64 or an invalid key is refused before anything is opened, so nothing \
            is written or created.

            With --expires-after, the value expires that many seconds from now: from then on it \
            reads as absent, in every program, and a compaction removes it. Writing the key again \
            without it stores a value that never expires.

            Creates the store when the directory does not exist yet (its parent must exist) or is \
            empty; never inside a non-empty directory that is not a store. Prints nothing on \
            success.

            EXAMPLES:
              tinystorage write ./settings streak 365
              tinystorage write ./settings profile '{"name": "Ada", "age": 36}'
              tinystorage write ./settings greeting --string 'Hello, world'
              tinystorage write ./settings offset -5
              tinystorage write ./settings avatar --data "$(base64 -w0 avatar.png)"
              tinystorage write ./settings token --string abc123 --expires-after 3600
            """
    )

    @OptionGroup var store: StoreArgument

    @Argument(help: "The key to write.")
    var key: String

    // NB: `.allUnrecognized` so a negative number such as -5 is taken as the value instead of
    // being rejected as an unknown option; `validate()` makes sure there is exactly one.
    @Argument(
        parsing: .allUnrecognized,
        help: ArgumentHelp("The value, as JSON (or any text with --string).", valueName: "value"))
    var values: [String] = []

    /// The one value; a `--` before it (the usual "no options after this") is accepted too.
    var value: String { values.last ?? "" }

    private var valueCount: Int { values.first == "--" ? values.count - 1 : values.count }

    @Flag(help: "Store <value> as a JSON string, so it needs no JSON quotes.")
    var string = false

    @Flag(help: "<value> is base64: store its bytes as a Data value.")
    var data = false

    // NB: `.unconditional`, so that a negative number is taken as the option's value (and refused
    // as a lifetime, exit 5) rather than as an unknown option.
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "The value expires this many seconds from now (fractions allowed).", valueName: "seconds"))
    var expiresAfter: String?

    func validate() throws {
        if valueCount < 1 { throw ValidationError("Missing expected argument '<value>'") }
        if valueCount > 1 {
            throw ValidationError(
                "Expected one value, got \(valueCount). Quote a value that contains spaces: '{\"a\": 1}'.")
        }
        if !string && values.first != "--" && value.hasPrefix("--") {
            throw ValidationError("Unknown option '\(value)'")
        }
        if string && data { throw ValidationError("Use either --string or --data, not both.") }
    }

    func execute() throws(CLIError) {
        try validateKey(key)
        let lifetime = try expiresAfter.map { (text) throws(CLIError) in try ExpirationText.lifetime(seconds: text) }
        let directory = store.directory
        if string {
            // NB: the library encodes the string itself (its bytes then match what an app's
            // `store("…", forKey:)` writes); only the size is checked early, so a value that is
            // too large creates no store.
            let size = JSONText.quoted(value).utf8.count
            guard size <= TinyStorage.maximumValueSize else {
                throw CLIError(
                    .invalidInput, "the value is \(size) bytes as JSON; the limit is \(TinyStorage.maximumValueSize).")
            }
            let storage = try directory.openForWriting(mayCreate: true)
            do {
                if let lifetime {
                    try storage.storeOrThrow(value, forKey: key, expiresAfter: lifetime)
                } else {
                    try storage.storeOrThrow(value, forKey: key)
                }
            } catch let error as TinyStorageError {
                throw directory.writeFailure(error)
            } catch {
                throw CLIError(.writeFailed, "writing to the store '\(directory.path)' failed: \(error)")
            }
            return
        }
        if data {
            guard let bytes = Data(base64Encoded: value, options: .ignoreUnknownCharacters) else {
                throw CLIError(
                    .invalidInput, "the value is not valid base64, which --data expects. Nothing was written.")
            }
            guard bytes.count <= TinyStorage.maximumValueSize else {
                throw CLIError(
                    .invalidInput, "the value is \(bytes.count) bytes; the limit is \(TinyStorage.maximumValueSize).")
            }
            return try store(StoredValue(bytes, kind: .data), in: directory, expiresAfter: lifetime)
        }
        let json: Data
        switch JSONText.validatedValue(Data(value.utf8)) {
        case .success(let data): json = data
        case .failure(let error):
            throw CLIError(
                error.kind,
                error.message + " Nothing was written. To store text, add --string, or quote it as JSON: '\"text\"'.")
        }
        try store(StoredValue(json, kind: .json), in: directory, expiresAfter: lifetime)
    }

    private func store(
        _ value: StoredValue, in directory: StoreDirectory, expiresAfter lifetime: Duration?
    ) throws(CLIError) {
        let storage = try directory.openForWriting(mayCreate: true)
        do throws(TinyStorageError) {
            var value = value
            if let lifetime { value.deadline = try storage.deadline(after: lifetime) }
            try storage.storeRaw([key: value])
        } catch {
            throw directory.writeFailure(error)
        }
    }
}

#endif
