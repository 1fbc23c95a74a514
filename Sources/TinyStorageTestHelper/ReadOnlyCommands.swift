// The tests spawn this helper with Foundation's `Process`, which exists on macOS and Linux only.
#if os(macOS) || os(Linux)

import Foundation
import TinyStorage

/// `read-only <insideDir> <name>`: opens the store read-only (as another user, when the test runs
/// it through `setpriv`), prints "ready", then "change <keys> <writeID>" for every change it is
/// told of (as `observe` does), and answers each line of standard input:
///
/// - `dump`: "value <key> <JSON>" for every key, sorted, then "end" (or "unavailable <code>");
/// - `write <key> <int>`: "refused <code>" when the store throws, "written" when it does not;
/// - `compact`: the same for a compaction.
func readOnly(_ arguments: [String]) -> Never {
    let storage = TinyStorage(
        insideDirectory: URL(fileURLWithPath: arguments[2], isDirectory: true), name: arguments[3],
        access: .readOnly, logger: StandardErrorLogger())
    let observer = printChanges(of: storage)
    Thread.detachNewThread {
        while let line = readLine() {
            let words = line.split(separator: " ").map(String.init)
            switch words.first {
            case "dump": dump(storage)
            case "write" where words.count == 3:
                answer { try storage.storeOrThrow(Int(words[2]) ?? 0, forKey: words[1]) }
            case "compact": answer { try storage.compactNow() }
            default: printLine("unknown request '\(line)'")
            }
        }
        exit(0)
    }
    printLine("ready")
    withExtendedLifetime((storage, observer)) { dispatchMain() }
}

/// `compact-readable-by <insideDir> <name> <readers>`: opens the store with `readableBy` set to
/// `readers` (`ownerOnly`, `ownerAndGroup` or `everyone`), compacts it once, and exits.
func compactReadableBy(_ arguments: [String]) {
    let readers: TinyStorage.Readers
    switch arguments[4] {
    case "ownerOnly": readers = .ownerOnly
    case "ownerAndGroup": readers = .ownerAndGroup
    case "everyone": readers = .everyone
    default: fail("unknown readers '\(arguments[4])'", code: 64)
    }
    let storage = TinyStorage(
        insideDirectory: URL(fileURLWithPath: arguments[2], isDirectory: true), name: arguments[3],
        readableBy: readers, logger: StandardErrorLogger())
    run { try storage.compactNow() }
}

private func dump(_ storage: TinyStorage) {
    do {
        let entries = try storage.rawEntries()
        for key in entries.keys.sorted() {
            guard let value = entries[key] else { continue }
            printLine("value \(key) \(String(decoding: value.bytes, as: UTF8.self))")
        }
        printLine("end")
    } catch {
        printLine("unavailable \(error.code.rawValue)")
    }
}

private func answer(_ body: () throws -> Void) {
    do {
        try body()
        printLine("written")
    } catch {
        printLine("refused \((error as? TinyStorageError)?.code.rawValue ?? "\(error)")")
    }
}

#endif
