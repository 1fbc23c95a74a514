// The "other process" that the integration tests spawn, race against and kill with SIGKILL.
//
// Uses TinyStorage's public API (plus `package` raw access for `dump`) exactly as an app would.
// Every line it prints to standard output is written with one `write(2)`, so a parent that kills
// it mid-way reads only whole lines. Log messages go to standard error, never to standard output.

// The tests spawn this helper with Foundation's `Process`, which exists on macOS and Linux only;
// elsewhere it is built as a stub that says so (like the CLI, see UnsupportedPlatform.swift there).
#if os(macOS) || os(Linux)

import Foundation
import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

let usage = """
    usage: TinyStorageTestHelper <command> <insideDirectory> <name> [arguments]

      write-loop <insideDir> <name> <keyCount> [start]
          Forever: store counter c (start, start+1, …) to key "k<c % keyCount>" and print
          "ack <key> <c>" after each store returns. `start` defaults to the largest value
          stored in those keys plus one.
      bulk-loop <insideDir> <name> [start]
          Forever: bulkStore generation n to the 50 keys "b0"…"b49" in one commit and print
          "ack <n>" after each returns. `start` defaults to the stored generation plus one.
      dump <insideDir> <name> [--wait-for-go]
          Print every key and its stored JSON as lines {"key":…,"value":…}, sorted by key (a Data
          value as {"key":…,"value":"<base64>","kind":"data"}). With --wait-for-go, print "ready"
          and wait for a line on standard input before opening the store.
      write <insideDir> <name> <key> <int>
          Store one Int and exit.
      write-json <insideDir> <name> <key> <json>
          Store the JSON text as the key's value, as it is (say, a newer app version's shape), and exit.
      update-tally <insideDir> <name> <key> <times> <writer> [--wait-for-go]
          `times` atomic updates of a Tally {count, byWriter, last} under the key, printing
          "count <n>" after each (see CrossProcessCommands.swift for this and the next four).
      read-on-request <insideDir> <name>
          Print "ready", then "value <key> <n|nil>" for each key read from standard input.
      read-only <insideDir> <name>
          Open the store read-only, print "ready", then "change …" lines as `observe` does, and
          answer "dump", "write <key> <int>" and "compact" lines (see ReadOnlyCommands.swift).
      compact-readable-by <insideDir> <name> <ownerOnly|ownerAndGroup|everyone>
          Open the store with that `readableBy`, compact it once, and exit.
      observe <insideDir> <name>
          Print "ready", then "change <keys> <writeID as a JSON string|none>" per
          didChangeNotification, received on the main thread as an app receives it.
      store-range <insideDir> <name> <key> <first> <last> [--wait-for-go]
          Store first…last to the key, each with a new writeID "range-<n>-<pid>"; print
          "ack <n> <writeID>".
      compact-until-stopped <insideDir> <name>
          Compact, print "started", compact until a line arrives, print "compacted <total>".
      increment <insideDir> <name> <key> <times> [--wait-for-go]
          Increment the key by one, `times` times. With --wait-for-go, print "ready" and wait
          for a line on standard input first, so a parent can start several at once.
      store-large <insideDir> <name> <key> <bytes> <times> <finalKey>
          Store a `bytes`-long string `times` times, then 1 under finalKey; print "done".
      lock-contract <insideDir> <name> <rounds>
          Updates, durable commits and compactions, checking that no closure and no logger
          call runs under a store lock; print "violations <closures> <logger calls>", then
          "ran <closures> <logger calls>".
      hold-commit-lock <insideDir> <name> <nothing|torn-record|half-published|renamed-unpublished|temporary-file>
          Take the store's commit lock, leave what a writer killed at that point leaves (a
          record stores the word under "unacknowledged"), print "holding" and wait, holding
          it, to be killed.
      watch-group <insideDir> <name>
          Print "ready", then "commit <keys> <writeID as a JSON string|none> stored <cases>" per
          commit, whichever process made it, with the cases of the group `profile` (name,
          email, avatar) that hold a value right after (see GroupCommands.swift).
      launch-streak <insideDir> <name> [--wait]
          Run an app's launch logic on key "streak" and report what the store said (see
          LaunchStreak.swift). With --wait, then wait until the store is available and run it again.

    """

/// Sends the store's log messages to standard error so standard output carries only results.
struct StandardErrorLogger: TinyStorageLogging {
    func log(_ level: TinyStorageLogLevel, _ message: String, file: String, function: String, line: Int) {
        printLine("[\(level)] \(message)", to: STDERR_FILENO)
    }
}

/// Writes `text` and a newline with a single `write(2)`, so the line is never split.
func printLine(_ text: String, to fd: Int32 = STDOUT_FILENO) {
    var bytes = Array(text.utf8)
    bytes.append(0x0A)
    var offset = 0
    while offset < bytes.count {
        let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if written > 0 {
            offset += written
        } else if written < 0 && errno != EINTR {
            exit(74)  // EX_IOERR: the parent went away.
        }
    }
}

func fail(_ message: String, code: Int32 = 1) -> Never {
    printLine("TinyStorageTestHelper: \(message)", to: STDERR_FILENO)
    exit(code)
}

func integer(_ text: String, _ what: String) -> Int {
    guard let value = Int(text) else { fail("\(what) must be an integer, not '\(text)'\n\n\(usage)", code: 64) }
    return value
}

func openStore(_ arguments: [String]) -> TinyStorage {
    let storage = TinyStorage(
        insideDirectory: URL(fileURLWithPath: arguments[2], isDirectory: true), name: arguments[3],
        logger: StandardErrorLogger())
    if case .unavailable(let error) = storage.availability { fail("the store is unavailable: \(error)") }
    return storage
}

func run(_ body: () throws -> Void) {
    do {
        try body()
    } catch {
        fail("\(error)")
    }
}

let arguments = CommandLine.arguments
if arguments.count == 2 && arguments[1] == "--help" {
    printLine(usage)
    exit(0)
}
guard arguments.count >= 4 else { fail("missing arguments\n\n\(usage)", code: 64) }

switch (arguments[1], arguments.count) {
case ("write-loop", 5), ("write-loop", 6):
    let keyCount = integer(arguments[4], "keyCount")
    guard keyCount > 0 else { fail("keyCount must be positive", code: 64) }
    let start = arguments.count == 6 ? integer(arguments[5], "start") : nil
    let storage = openStore(arguments)
    run {
        var counter: Int
        if let start {
            counter = start
        } else {
            counter = 0
            for index in 0..<keyCount {
                counter = max(counter, try storage.retrieveOrThrow(type: Int.self, forKey: "k\(index)") ?? 0)
            }
            counter += 1
        }
        while true {
            let key = "k\(counter % keyCount)"
            try storage.storeOrThrow(counter, forKey: key)
            printLine("ack \(key) \(counter)")
            counter += 1
        }
    }

case ("bulk-loop", 4), ("bulk-loop", 5):
    let start = arguments.count == 5 ? integer(arguments[4], "start") : nil
    let storage = openStore(arguments)
    let keys = (0..<50).map { "b\($0)" }
    run {
        var generation = try start ?? (storage.retrieveOrThrow(type: Int.self, forKey: "b0") ?? 0) + 1
        while true {
            let items: [String: (any Codable)?] = Dictionary(uniqueKeysWithValues: keys.map { ($0, generation) })
            try storage.bulkStoreOrThrow(items: items)
            printLine("ack \(generation)")
            generation += 1
        }
    }

case ("dump", 4), ("dump", 5):
    if arguments.count == 5 { waitForGo() }
    let storage = openStore(arguments)
    run {
        // The process that repaired a damaged store is told of the data loss once, by its first
        // throwing read: say so on standard error, then read what the repair kept.
        let entries: [String: StoredValue]
        do {
            entries = try storage.rawEntries()
        } catch let error as TinyStorageError where error.code == .corrupted {
            printLine("reported: \(error)", to: STDERR_FILENO)
            entries = try storage.rawEntries()
        }
        let encoder = JSONEncoder()
        for key in entries.keys.sorted() {
            guard let value = entries[key] else { continue }
            let keyJSON = String(decoding: try encoder.encode(key), as: UTF8.self)
            if value.kind == .data {
                printLine("{\"key\":\(keyJSON),\"value\":\"\(value.bytes.base64EncodedString())\",\"kind\":\"data\"}")
            } else {
                printLine("{\"key\":\(keyJSON),\"value\":\(String(decoding: value.bytes, as: UTF8.self))}")
            }
        }
    }

case ("write", 6):
    let value = integer(arguments[5], "value")
    let storage = openStore(arguments)
    run { try storage.storeOrThrow(value, forKey: arguments[4]) }

case ("write-json", 6):
    let storage = openStore(arguments)
    run { try storage.storeRaw([arguments[4]: StoredValue(Data(arguments[5].utf8), kind: .json)]) }

case ("update-tally", 7), ("update-tally", 8):
    if arguments.count == 8, arguments[7] != "--wait-for-go" {
        fail("unknown option '\(arguments[7])'\n\n\(usage)", code: 64)
    }
    updateTally(arguments)

case ("read-on-request", 4):
    readOnRequest(arguments)

case ("observe", 4):
    observe(arguments)

case ("read-only", 4):
    readOnly(arguments)

case ("compact-readable-by", 5):
    compactReadableBy(arguments)

case ("store-range", 7), ("store-range", 8):
    if arguments.count == 8, arguments[7] != "--wait-for-go" {
        fail("unknown option '\(arguments[7])'\n\n\(usage)", code: 64)
    }
    storeRange(arguments)

case ("compact-until-stopped", 4):
    compactUntilStopped(arguments)

case ("increment", 6), ("increment", 7):
    let times = integer(arguments[5], "times")
    if arguments.count == 7 {
        guard arguments[6] == "--wait-for-go" else { fail("unknown option '\(arguments[6])'\n\n\(usage)", code: 64) }
    }
    let storage = openStore(arguments)
    if arguments.count == 7 {
        printLine("ready")
        guard readLine() != nil else { fail("standard input closed before the go signal") }
    }
    run {
        for _ in 0..<times { try storage.incrementIntegerOrThrow(forKey: arguments[4]) }
    }

case ("store-large", 8):
    storeLarge(arguments)

case ("lock-contract", 5):
    lockContract(arguments)

case ("hold-commit-lock", 5):
    guard let remains = CommitLockRemains(rawValue: arguments[4]) else {
        fail("unknown remains '\(arguments[4])'\n\n\(usage)", code: 64)
    }
    let storage = openStore(arguments)
    run {
        try storage.holdCommitLock(leaving: remains) {
            printLine("holding")
            while true { pause() }
        }
    }

case ("launch-streak", 4), ("launch-streak", 5):
    launchStreak(arguments)

case ("watch-group", 4):
    watchGroup(arguments)

default:
    fail(
        "unknown command or wrong number of arguments: \(arguments.dropFirst().joined(separator: " "))\n\n\(usage)",
        code: 64)
}
exit(0)

#else

import Foundation

try? FileHandle.standardError.write(contentsOf: Data("TinyStorageTestHelper is for tests on macOS and Linux.\n".utf8))
exit(69)  // EX_UNAVAILABLE (sysexits.h)

#endif
