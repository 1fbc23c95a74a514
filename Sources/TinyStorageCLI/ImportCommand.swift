// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import ArgumentParser
import Foundation
import TinyStorage

/// `tinystorage import <store-dir> <file>`
struct ImportCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Store every key of a JSON object file in one atomic commit.",
        discussion: """
            The file holds one JSON object of key to value, as `export` prints it. Each value is \
            stored byte for byte as it appears in the file, except those its "$tinystorage.kinds" \
            member lists (Data values, in base64, and values of the original TinyStorage), which get \
            back the bytes and kind they were exported with. Keys not in the file keep their values. \
            All keys are written in one atomic commit, or none: the whole file is checked first, \
            and any invalid JSON, invalid key or repeated key writes nothing and creates nothing. \
            Creates the store like `write` does. Prints nothing on success.

            EXAMPLES:
              tinystorage import ./settings settings.json
              tinystorage export ./settings | tinystorage import ./settings-copy -
            """
    )

    @OptionGroup var store: StoreArgument

    @Argument(help: "The JSON file to import; - reads standard input.")
    var file: String

    func execute() throws(CLIError) {
        let items = try parse(try readFile())
        let directory = store.directory
        let storage = try directory.openForWriting(mayCreate: true)
        do throws(TinyStorageError) {
            try storage.storeRaw(items)
        } catch {
            throw directory.writeFailure(error)
        }
    }

    private var fileName: String { file == "-" ? "standard input" : "'\(file)'" }

    private func readFile() throws(CLIError) -> Data {
        if file == "-" { return FileHandle.standardInput.readDataToEndOfFile() }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory) else {
            throw CLIError(.invalidInput, "cannot read \(fileName): no such file.")
        }
        if isDirectory.boolValue {
            throw CLIError(.invalidInput, "cannot read \(fileName): it is a directory, not a JSON file.")
        }
        guard let data = FileManager.default.contents(atPath: file) else {
            throw CLIError(.invalidInput, "cannot read \(fileName): check its permissions.")
        }
        return data
    }

    /// Every key and value of the file, checked as the library will check them.
    private func parse(_ data: Data) throws(CLIError) -> [String: StoredValue] {
        let members: [JSONScanner.Member]
        do {
            members = try JSONScanner.members(ofObject: data)
        } catch {
            throw CLIError(
                .invalidInput,
                "\(fileName) is not a JSON object of key to value: \(error.description). Nothing was written.")
        }
        var values: [String: Data] = [:]
        var kinds: [String: String] = [:]
        for member in members {
            let keyBytes = data.subdata(in: member.key)
            guard let key = try? JSONDecoder().decode(String.self, from: keyBytes) else {
                let shown = String(decoding: keyBytes, as: UTF8.self)
                throw CLIError(
                    .invalidInput, "in \(fileName), the key \(shown) is not a valid string. Nothing was written.")
            }
            do {
                try validateKey(key)
            } catch {
                throw CLIError(.invalidInput, "in \(fileName): \(error.message) Nothing was written.")
            }
            guard values[key] == nil, key != ExportFormat.kindsMember || kinds.isEmpty else {
                let quoted = JSONText.quoted(key)
                throw CLIError(.invalidInput, "in \(fileName), the key \(quoted) appears twice. Nothing was written.")
            }
            if key == ExportFormat.kindsMember {
                switch ExportFormat.kinds(from: data.subdata(in: member.value)) {
                case .success(let listed): kinds = listed
                case .failure(let error):
                    throw CLIError(.invalidInput, "in \(fileName): \(error.message) Nothing was written.")
                }
                continue
            }
            switch JSONText.validatedValue(data.subdata(in: member.value)) {
            case .success(let value): values[key] = value
            case .failure(let error):
                throw CLIError(
                    .invalidInput,
                    "in \(fileName), the value of \(JSONText.quoted(key)): \(error.message) Nothing was written.")
            }
        }
        var items: [String: StoredValue] = [:]
        for (key, json) in values {
            switch ExportFormat.value(json, kind: kinds[key]) {
            case .success(let value): items[key] = value
            case .failure(let error):
                throw CLIError(
                    .invalidInput,
                    "in \(fileName), the value of \(JSONText.quoted(key)): \(error.message) Nothing was written.")
            }
        }
        if let missing = kinds.keys.first(where: { values[$0] == nil }) {
            throw CLIError(
                .invalidInput,
                "in \(fileName), \(JSONText.quoted(ExportFormat.kindsMember)) names \(JSONText.quoted(missing)), "
                    + "which has no value. Nothing was written.")
        }
        return items
    }
}

#endif
