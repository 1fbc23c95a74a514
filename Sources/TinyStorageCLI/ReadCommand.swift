// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import ArgumentParser
import TinyStorage

/// `tinystorage read <store-dir> [key] [--raw]`
struct ReadCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "read",
        abstract: "Print a key's value, or the whole store, as JSON.",
        discussion: """
            With a key, prints its value as indented JSON with sorted keys. Numbers may be shown \
            normalized (1.0 as 1); --raw prints the bytes exactly as stored, with no newline added. \
            Without a key, prints the whole store as one JSON object. Never creates a store or writes a \
            value. Exits with 1 when the key is not in the store, and with 7, printing nothing, when the \
            store is damaged and the damaged bytes may have held the key: then neither its value nor \
            its absence can be told (a script must not fall back to a default). `verify` names the \
            keys the damage may have hit.

            A Data value (stored by an app as raw bytes, or adopted from the original TinyStorage) is \
            not JSON: it is shown as a JSON string of its bytes in base64, with a note on standard \
            error saying so; --raw prints the bytes themselves. `write --data` stores such a value.

            A value that expires (stored with `expiresAfter:`, or `write --expires-after`) is printed \
            as any other, with a note on standard error saying when it expires. A value whose time \
            has passed is not in the store: reading its key exits with 1, as for any missing key, \
            even while its bytes wait in the data file for a compaction. `keys --expiring` lists \
            when each value expires.

            EXAMPLES:
              tinystorage read ./settings streak
              tinystorage read ./settings profile --raw
              tinystorage read ./settings avatar --raw > avatar.png
              tinystorage read ./settings
            """
    )

    @OptionGroup var store: StoreArgument

    @Argument(help: "The key to read. Without it, the whole store is printed.")
    var key: String?

    @Flag(help: "Print the key's stored bytes exactly, without formatting or a trailing newline.")
    var raw = false

    func validate() throws {
        if raw && key == nil {
            throw ValidationError("--raw needs a key; `tinystorage export` prints every stored value as is.")
        }
    }

    func execute() throws(CLIError) {
        if let key { try validateKey(key) }
        let directory = store.directory
        let entries = try directory.readEntries(answering: key)
        guard let key else {
            Console.write(JSONText.prettyObject(entries))
            let base64 = entries.filter { JSONText.shown($0.value).isBase64 }.map(\.key)
            if let note = JSONText.base64Note(for: base64, rawAdvice: "`read <key> --raw` prints the bytes.") {
                Console.note(note, prefix: "note")
            }
            return
        }
        guard let value = entries[key] else {
            throw CLIError(
                .notFound,
                "no key \(JSONText.quoted(key)) in the store '\(directory.path)'. "
                    + "`tinystorage keys '\(directory.path)'` lists its keys.")
        }
        if let deadline = value.deadline {
            Console.note("\(JSONText.quoted(key)) expires at \(ExpirationText.describe(deadline)).", prefix: "note")
        }
        if raw {
            Console.write(value.bytes)
            return
        }
        let shown = JSONText.shown(value)
        Console.write(JSONText.pretty(shown.json) + "\n")
        if shown.isBase64, let note = JSONText.base64Note(for: [key], rawAdvice: "--raw prints the bytes.") {
            Console.note(note, prefix: "note")
        }
    }
}

#endif
