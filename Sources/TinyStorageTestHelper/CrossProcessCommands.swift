// Subcommands for issue 3 (many processes, one truth): atomic updates from several processes,
// reads on request, a notification observer, numbered writes with writeIDs, and compaction while
// other processes work. Each prints one line per event, so a parent can follow along.

// Built where Foundation's `Process` exists (see main.swift).
#if os(macOS) || os(Linux)

import Foundation
import TinyStorage

/// What `update-tally` keeps under its key: a count, how much of it each writer added, and the
/// last writer. A lost update shows as a count below the total, or as counts that do not add up.
struct Tally: Codable, Sendable {
    var count = 0
    var byWriter: [String: Int] = [:]
    var last = ""
}

/// Prints "ready" and waits for a line on standard input, so a parent can start several at once.
func waitForGo() {
    printLine("ready")
    guard readLine() != nil else { fail("standard input closed before the go signal") }
}

/// `update-tally <insideDir> <name> <key> <times> <writer> [--wait-for-go]`
func updateTally(_ arguments: [String]) {
    let times = integer(arguments[5], "times")
    let writer = arguments[6]
    let storage = openStore(arguments)
    if arguments.count == 8 { waitForGo() }
    run {
        for _ in 0..<times {
            let count = try storage.update(arguments[4], as: Tally.self) { tally in
                var next = tally ?? Tally()
                next.count += 1
                next.byWriter[writer, default: 0] += 1
                next.last = "\(writer):\(next.count)"
                tally = next
                return next.count
            }
            printLine("count \(count)")
        }
    }
}

/// `read-on-request <insideDir> <name>`: reads every key once (so the store is open and its values
/// cached), prints "ready", then for each line `<key>` on standard input prints "value <key> <n>"
/// (or `nil` when absent) after one `retrieveOrThrow(type: Int.self, …)`.
func readOnRequest(_ arguments: [String]) {
    let storage = openStore(arguments)
    for key in storage.allKeys { _ = try? storage.retrieveOrThrow(type: Int.self, forKey: key) }
    printLine("ready")
    while let key = readLine() {
        do {
            let value = try storage.retrieveOrThrow(type: Int.self, forKey: key)
            printLine("value \(key) \(value.map(String.init) ?? "nil")")
        } catch {
            printLine("value \(key) error \(error)")
        }
    }
}

/// `observe <insideDir> <name>`: prints "ready" once observing, then one line per
/// `didChangeNotification`, "change <keys, sorted, comma-separated> <writeID as JSON|none>", until
/// standard input closes.
///
/// Like an app: the main thread runs the main queue (`dispatchMain()`), where the store posts its
/// notifications, and the observer relies on that with `MainActor.assumeIsolated`, which stops
/// the process if a notification arrives on any other thread.
func observe(_ arguments: [String]) -> Never {
    let storage = openStore(arguments)
    let observer = printChanges(of: storage)
    Thread.detachNewThread {
        while readLine() != nil {}
        exit(0)
    }
    printLine("ready")
    withExtendedLifetime((storage, observer)) { dispatchMain() }
}

/// Prints "change <keys> <writeID>" for every `didChangeNotification` of `storage`, on the main
/// thread (see ``observe(_:)``). Keep the observer for as long as the lines are wanted.
func printChanges(of storage: TinyStorage) -> any NSObjectProtocol {
    NotificationCenter.default.addObserver(
        forName: TinyStorage.didChangeNotification, object: storage, queue: nil
    ) { notification in
        let keys = (notification.userInfo?[TinyStorage.changedKeysUserInfoKey] as? [String])?.sorted()
        let writeID = notification.userInfo?[TinyStorage.writeIDUserInfoKey] as? String
        MainActor.assumeIsolated {
            printLine("change \(keys?.joined(separator: ",") ?? "<no keys>") \(writeIDText(writeID))")
        }
    }
}

/// A writeID as the `observe` command prints it: a JSON string, or `none`.
func writeIDText(_ writeID: String?) -> String {
    guard let writeID, let json = try? JSONEncoder().encode(writeID) else { return "none" }
    return String(decoding: json, as: UTF8.self)
}

/// `store-range <insideDir> <name> <key> <first> <last> [--wait-for-go]`: stores first…last to the
/// key in order, each with the writeID "range-<n>-<pid>", printing "ack <n> <writeID>" after each
/// store returns.
func storeRange(_ arguments: [String]) {
    let first = integer(arguments[5], "first")
    let last = integer(arguments[6], "last")
    guard first <= last else { fail("first must not be greater than last", code: 64) }
    let storage = openStore(arguments)
    if arguments.count == 8 { waitForGo() }
    run {
        for value in first...last {
            let writeID = "range-\(value)-\(getpid())"
            try storage.storeOrThrow(value, forKey: arguments[4], writeID: writeID)
            printLine("ack \(value) \(writeID)")
        }
    }
}

/// `compact-until-stopped <insideDir> <name>`: compacts once and prints "started", then compacts
/// again and again until a line (or the end) arrives on standard input, and prints
/// "compacted <total>".
func compactUntilStopped(_ arguments: [String]) {
    let storage = openStore(arguments)
    let stop = StopFlag()
    var total = 0
    run {
        try storage.compactNow()
        total += 1
        printLine("started")
        Thread.detachNewThread {
            _ = readLine()
            stop.set()
        }
        while !stop.isSet {
            try storage.compactNow()
            total += 1
        }
    }
    printLine("compacted \(total)")
}

/// A flag one thread sets and another polls.
final class StopFlag: @unchecked Sendable {
    // @unchecked: `value` is only touched while holding `lock`.
    private let lock = NSLock()
    private var value = false

    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}

#endif
