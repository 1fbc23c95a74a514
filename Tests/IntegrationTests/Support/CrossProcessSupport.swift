import Foundation
import Testing
import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// Support for the issue 3 tests (many processes, notifications, observation).

/// Kills helpers still running after `seconds`, so a hung helper ends its test with a failure
/// (its output ends early) instead of hanging the whole run. It never decides what passes.
final class Watchdog: @unchecked Sendable {
    // @unchecked: `processes` and `state` are only touched while holding `lock`.
    private let lock = NSLock()
    private var processes: [Process] = []
    private var cancelled = false
    private var killed = false

    init(seconds: Double = 120) {
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
            lock.withLock {
                guard !cancelled else { return }
                for process in processes where process.isRunning {
                    kill(process.processIdentifier, SIGKILL)
                    killed = true
                }
            }
        }
    }

    /// Adds `helper` to the processes killed at the deadline, and returns it.
    @discardableResult
    func guarding(_ helper: HelperProcess) -> HelperProcess {
        lock.withLock { processes.append(helper.process) }
        return helper
    }

    /// Whether the deadline passed with a helper still running.
    var fired: Bool { lock.withLock { killed } }

    func cancel() { lock.withLock { cancelled = true } }
}

/// Counts notifications and values arriving on other threads, and lets a test wait for a number
/// of them (the timeout only guards against a hang).
final class Arrivals<Element: Sendable>: @unchecked Sendable {
    // @unchecked: `elements` is only touched while holding `condition`.
    private let condition = NSCondition()
    private var elements: [Element] = []

    func append(_ element: Element) {
        condition.withLock {
            elements.append(element)
            condition.broadcast()
        }
    }

    var all: [Element] { condition.withLock { elements } }

    /// Waits until what arrived satisfies `condition` or `seconds` passed; returns what arrived.
    func wait(until condition: ([Element]) -> Bool, seconds: Double = 60) -> [Element] {
        let deadline = Date(timeIntervalSinceNow: seconds)
        return self.condition.withLock {
            while !condition(elements), self.condition.wait(until: deadline) {}
            return elements
        }
    }

    /// Waits until at least `count` elements arrived or `seconds` passed; returns what arrived.
    func wait(forCount count: Int, seconds: Double = 60) -> [Element] {
        let deadline = Date(timeIntervalSinceNow: seconds)
        return condition.withLock {
            while elements.count < count, condition.wait(until: deadline) {}
            return elements
        }
    }
}

/// One `didChangeNotification` as the `observe` helper prints it: "change <keys> <writeID|none>",
/// the writeID as a JSON string.
func changeLine(keys: [String], writeID: String?) -> String {
    let shown = writeID.flatMap { try? JSONEncoder().encode($0) }.map { String(decoding: $0, as: UTF8.self) }
    return "change \(keys.sorted().joined(separator: ",")) \(shown ?? "none")"
}

/// Whether the `changeLine` `line` names `key` among its changed keys (another process's
/// consecutive commits may be announced together, naming the keys of all of them).
func changeLine(_ line: String, names key: String) -> Bool {
    let parts = line.split(separator: " ", maxSplits: 2)
    return parts.count == 3 && parts[0] == "change" && parts[1].split(separator: ",").contains(Substring(key))
}

/// Records `storage`'s notifications in this process as `changeLine`s until it is released.
final class ChangeRecorder: @unchecked Sendable {
    // @unchecked: `observer` is set once in `init` and only handed back to `removeObserver`.
    let lines = Arrivals<String>()
    private var observer: (any NSObjectProtocol)?

    init(_ storage: TinyStorage) {
        let lines = self.lines
        observer = NotificationCenter.default.addObserver(
            forName: TinyStorage.didChangeNotification, object: storage, queue: nil
        ) { notification in
            let keys = notification.userInfo?[TinyStorage.changedKeysUserInfoKey] as? [String] ?? ["<no keys>"]
            let writeID = notification.userInfo?[TinyStorage.writeIDUserInfoKey] as? String
            lines.append(changeLine(keys: keys, writeID: writeID))
        }
    }

    deinit {
        if let observer { NotificationCenter.default.removeObserver(observer) }
    }
}

/// Reads lines from `helper` until one satisfies `isLast` or the helper's output ends.
func readLines(from helper: HelperProcess, until isLast: (String) -> Bool) -> [String] {
    var lines: [String] = []
    while let line = helper.readLine() {
        lines.append(line)
        if isLast(line) { break }
    }
    return lines
}

/// Reads exactly `count` lines from `helper` (fewer when its output ends first).
func readLines(from helper: HelperProcess, count: Int) -> [String] {
    var lines: [String] = []
    while lines.count < count, let line = helper.readLine() { lines.append(line) }
    return lines
}

/// The value `update-tally` keeps (see the helper's CrossProcessCommands.swift).
struct Tally: Codable, Equatable, Sendable {
    var count = 0
    var byWriter: [String: Int] = [:]
    var last = ""
}
