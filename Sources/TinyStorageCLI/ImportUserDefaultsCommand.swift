// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import ArgumentParser
import Foundation
import TinyStorage

/// `tinystorage import-userdefaults <store-dir> (--suite NAME | --plist PATH) [--require KEY] [--overwrite]`
struct ImportUserDefaultsCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-userdefaults",
        abstract: "Copy every key of a UserDefaults suite or plist file into a store, in one commit.",
        usage:
            "tinystorage import-userdefaults <store-dir> (--suite <name> | --plist <path>) [--require <key> ...] [--overwrite]",
        discussion: """
            Reads every key of the source and stores it the way TinyStorage stores the same Swift \
            value: booleans as true/false (told apart from the numbers 0 and 1), integers, doubles, \
            strings, dates (seconds since 2001, JSONEncoder's default), and arrays and dictionaries \
            of those as JSON; data as its raw bytes (a Data value; base64 inside an array or \
            dictionary). All keys are written in one atomic commit. The source is never changed. \
            Creates the store like `write` does.

            Skipped, and listed: keys already in the store (unless --overwrite), and nested \
            collections (an array or dictionary inside another), which are not supported. Failed, \
            and listed: values that cannot be stored (NaN, an integer too large for Int, a value \
            over 16 MiB, an invalid key). Prints one line per key and a summary.

            An unavailable UserDefaults (its file unreadable, or encrypted before the first unlock) \
            looks empty instead of failing. Name a key the source always has with --require: when \
            it is missing, nothing is written and the command exits with 1.

            EXAMPLES:
              tinystorage import-userdefaults ./settings --plist com.example.app.plist
              tinystorage import-userdefaults ./settings --suite com.example.app \\
                  --require hasLaunchedBefore
              tinystorage import-userdefaults ./settings --plist old.plist --overwrite
            """
    )

    @OptionGroup var store: StoreArgument

    @Option(
        help: ArgumentHelp("The UserDefaults suite name to read, as in UserDefaults(suiteName:).", valueName: "name"))
    var suite: String?

    @Option(
        help: ArgumentHelp(
            "A property list file to read (XML or binary), such as a saved preferences file.", valueName: "path"))
    var plist: String?

    @Option(
        name: .customLong("require"),
        help: ArgumentHelp(
            "A key that must be in the source, or nothing is imported (repeat for several).", valueName: "key"))
    var requiredKeys: [String] = []

    @Flag(help: "Replace values of keys the store already holds; by default they are kept and listed as skipped.")
    var overwrite = false

    func validate() throws {
        switch (suite, plist) {
        case (nil, nil):
            throw ValidationError("Name the source: --suite <name> or --plist <path>.")
        case (.some, .some):
            throw ValidationError("Use either --suite or --plist, not both.")
        default: break
        }
    }

    func execute() throws(CLIError) {
        let source = try readSource()
        let missing = requiredKeys.filter { key in !TinyStorage.isPresentPropertyListValue(source.values[key]) }
        if !missing.isEmpty {
            let keys = missing.map(JSONText.quoted).joined(separator: ", ")
            throw CLIError(
                .notFound,
                "\(source.name) has no \(keys), the key --require names, so it may be unavailable or not yet "
                    + "written and only look empty. Nothing was imported; try again when it holds that key.")
        }
        var plan = ImportPlan(source: source, overwrite: overwrite)
        let directory = store.directory
        guard plan.hasCandidates else {
            Console.write(plan.summary(storePath: directory.path))
            return
        }
        let storage = try directory.openForWriting(mayCreate: true)
        do {
            plan.keepExisting(try storage.rawEntries())
            if !plan.items.isEmpty { try storage.storeRaw(plan.items) }
        } catch {
            throw directory.writeFailure(error)
        }
        Console.write(plan.summary(storePath: directory.path))
    }

    // MARK: Reading the source

    /// The source's keys and values, and how to name it in messages.
    struct Source {
        let name: String
        let values: [String: Any]
    }

    private func readSource() throws(CLIError) -> Source {
        if let suite {
            guard let defaults = UserDefaults(suiteName: suite) else {
                throw CLIError(
                    .invalidInput,
                    "UserDefaults refuses the suite name '\(suite)'; pass the suite's own name, such as "
                        + "com.example.app, or its plist file with --plist.")
            }
            return Source(name: "the suite '\(suite)'", values: defaults.persistentDomain(forName: suite) ?? [:])
        }
        let path = plist ?? ""
        let name = "the plist '\(path)'"
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw CLIError(.invalidInput, "cannot read \(name): no such file. Check the path; nothing was written.")
        }
        guard !isDirectory.boolValue, let data = FileManager.default.contents(atPath: path) else {
            let reason = isDirectory.boolValue ? "it is a directory" : "check its permissions"
            throw CLIError(.invalidInput, "cannot read \(name): \(reason). Nothing was written.")
        }
        let object: Any
        do {
            object = try PropertyListSerialization.propertyList(from: data, options: [], format: nil)
        } catch {
            throw CLIError(
                .invalidInput,
                "\(name) is not a property list (XML or binary plist). Nothing was written.")
        }
        guard let dictionary = object as? [AnyHashable: Any] else {
            throw CLIError(
                .invalidInput,
                "\(name) holds a \(type(of: object)), not a dictionary of keys and values. Nothing was written.")
        }
        var values: [String: Any] = [:]
        for (key, value) in dictionary {
            guard let key = key.base as? String else { continue }
            values[key] = value
        }
        return Source(name: name, values: values)
    }
}

#endif
