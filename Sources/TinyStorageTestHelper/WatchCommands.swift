// Subcommands for issue 10 (the app-group story): commits large enough to make the log compact
// while other processes listen, and a workload that checks, from inside another process, that no
// logger call and no `update` closure runs while a store lock is held.

// Built where Foundation's `Process` exists (see main.swift).
#if os(macOS) || os(Linux)

import Foundation
import TinyStorage

/// `store-large <insideDir> <name> <key> <bytes> <times> <finalKey>`: stores a `bytes`-long string
/// under `key`, `times` times (a different one each time, so the log passes its compaction
/// threshold and the file is replaced along the way), then `1` under `finalKey`, and prints "done".
func storeLarge(_ arguments: [String]) {
    let size = integer(arguments[5], "bytes")
    let times = integer(arguments[6], "times")
    let storage = openStore(arguments)
    run {
        for round in 0..<times {
            let value = String(repeating: Character(UnicodeScalar(UInt8(65 + round % 26))), count: size)
            try storage.storeOrThrow(value, forKey: arguments[4])
        }
        try storage.storeOrThrow(1, forKey: arguments[7])
    }
    printLine("done")
}

/// A logger that counts its calls, and those made while a store lock was held.
final class LockCheckingLogger: TinyStorageLogging, @unchecked Sendable {
    // @unchecked: `calls` and `violations` are only touched while holding `lock`.
    private let lock = NSLock()
    private var calls = 0
    private var violations = 0

    func log(_ level: TinyStorageLogLevel, _ message: String, file: String, function: String, line: Int) {
        let locked = TinyStorage.isHoldingStoreLock
        lock.lock()
        calls += 1
        if locked { violations += 1 }
        lock.unlock()
    }

    var counts: (calls: Int, violations: Int) {
        lock.lock()
        defer { lock.unlock() }
        return (calls, violations)
    }
}

/// `lock-contract <insideDir> <name> <rounds>`: `rounds` rounds of an `update` whose closure
/// checks that no store lock is held, a durable commit, and every tenth round a compaction and
/// a failing encode (which logs), with a logger that checks the same; prints
/// "violations <closures> <logger calls>", then "ran <closures> <logger calls>": how many of
/// each were checked at all.
func lockContract(_ arguments: [String]) {
    let rounds = integer(arguments[4], "rounds")
    let logger = LockCheckingLogger()
    let storage = TinyStorage(
        insideDirectory: URL(fileURLWithPath: arguments[2], isDirectory: true), name: arguments[3],
        durability: .immediate, logger: logger)
    var closureViolations = 0
    var closureRuns = 0
    run {
        for round in 0..<rounds {
            try storage.update("counter", as: Int.self) { value in
                closureRuns += 1
                if TinyStorage.isHoldingStoreLock { closureViolations += 1 }
                value = (value ?? 0) + 1
            }
            try storage.storeOrThrow(String(repeating: "v", count: 2_000 + round), forKey: "pad\(round % 7)")
            if round % 10 == 0 {
                try storage.compactNow()
                storage.store(Double.nan, forKey: "unencodable")
            }
        }
    }
    let logged = logger.counts
    printLine("violations \(closureViolations) \(logged.violations)")
    printLine("ran \(closureRuns) \(logged.calls)")
}

#endif
