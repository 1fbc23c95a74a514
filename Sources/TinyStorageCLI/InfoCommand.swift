import ArgumentParser
import Foundation

/// `tinystorage info <store-dir>`
struct InfoCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Describe a store: its files, key count and whether it can be read.",
        discussion: """
            The data file's size includes space reserved ahead of the next commits. When bytes \
            failed verification, the quarantine line says where they were kept. For a store that \
            cannot be read, prints what it can, then the reason as an error, and exits with 4. \
            Never creates a store or writes a value.

            EXAMPLE:
              tinystorage info ./settings
            """
    )

    @OptionGroup var store: StoreArgument

    func execute() throws(CLIError) {
        let directory = store.directory
        let state = directory.inspect()
        guard case .store(let size) = state else { throw directory.notAStore(state) }
        var lines = [
            "store:       \(directory.url.path)",
            "data file:   \(directory.dataFileURL.path) (\(size) bytes)",
        ]
        let quarantine = directory.url.appendingPathComponent("quarantine", isDirectory: true)
        if let files = try? FileManager.default.contentsOfDirectory(atPath: quarantine.path), !files.isEmpty {
            lines.append("quarantine:  \(files.count) file(s) in \(quarantine.path)")
        }
        do {
            let entries = try directory.readEntries()
            lines += ["keys:        \(entries.count)", "available:   yes"]
            Console.write(lines.map { $0 + "\n" }.joined())
        } catch {
            lines += ["keys:        unknown", "available:   no"]
            Console.write(lines.map { $0 + "\n" }.joined())
            throw error
        }
    }
}
