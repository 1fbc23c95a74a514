// Subcommands for issue 33, item 6 (every key of a group): another process following a key
// group commit by commit, so a test can see a group's keys arrive and leave.

// Built where Foundation's `Process` exists (see main.swift).
#if os(macOS) || os(Linux)

import Foundation
import TinyStorage

/// The group `watch-group` follows; IntegrationTests declares the same one.
enum SharedProfile: String, TinyStorageKeyGroup, CaseIterable {
    static let prefix = "profile"
    case name, email, avatar
}

/// `watch-group <insideDir> <name>`: prints "ready" once following the store, then one line per
/// commit, in commit order, whichever process made it: "commit <keys in the commit's order,
/// comma-separated> <writeID as JSON|none> stored <the cases of `SharedProfile` that hold a value,
/// read right after, comma-separated, or ->", until standard input closes.
func watchGroup(_ arguments: [String]) -> Never {
    let storage = openStore(arguments)
    let changes = storage.rawChanges()
    Task {
        for await change in changes {
            let stored = storage.group(SharedProfile.self).storedKeys.map(\.rawValue)
            printLine(
                "commit \(change.keys.joined(separator: ",")) \(writeIDText(change.writeID)) "
                    + "stored \(stored.isEmpty ? "-" : stored.joined(separator: ","))")
        }
    }
    Thread.detachNewThread {
        while readLine() != nil {}
        exit(0)
    }
    printLine("ready")
    withExtendedLifetime(storage) { dispatchMain() }
}

#endif
