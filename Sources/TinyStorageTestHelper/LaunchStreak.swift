// `launch-streak`: the app launch that must never reset a streak (issue 4's scenario).
//
// Runs the launch logic an app would run, `let s = retrieve(...) ?? 0; store(s + 1, ...)`, and
// reports on standard output, one line each, what the store said along the way, so a test that
// ran this helper as a user who cannot read the store can check that nothing was invented or
// overwritten. With `--wait`, it then waits for the store to become available (without reopening
// it) and runs the launch logic once more.

// Built where Foundation's `Process` exists (see main.swift).
#if os(macOS) || os(Linux)

import Foundation
import TinyStorage

/// The name of a `TinyStorageError`'s code, with its underlying error's code when it has one:
/// `unavailable/permissionDenied`.
func describeCode(_ error: any Error) -> String {
    guard let error = error as? TinyStorageError else { return "foreign(\(type(of: error)))" }
    guard let cause = error.underlying as? TinyStorageError else { return error.code.rawValue }
    return "\(error.code.rawValue)/\(cause.code.rawValue)"
}

/// Prints what the store says right now and runs the launch logic once.
///
/// ```text
/// availability available | availability unavailable <code>
/// retrieveOrThrow <value> | retrieveOrThrow nil | retrieveOrThrow threw <code>[/<cause>]
/// launch retrieved <value>|nil attempted <value>
/// storeOrThrow ok | storeOrThrow threw <code>[/<cause>]
/// ```
func runLaunchLogic(_ storage: TinyStorage) {
    switch storage.availability {
    case .available: printLine("availability available")
    case .unavailable(let reason): printLine("availability unavailable \(describeCode(reason))")
    }
    do {
        let value = try storage.retrieveOrThrow(type: Int.self, forKey: "streak")
        printLine("retrieveOrThrow \(value.map(String.init) ?? "nil")")
    } catch {
        printLine("retrieveOrThrow threw \(describeCode(error))")
    }
    // The app's launch code, exactly as issue 4 writes it.
    let retrieved = storage.retrieve(type: Int.self, forKey: "streak")
    let s = retrieved ?? 0
    storage.store(s + 1, forKey: "streak")
    printLine("launch retrieved \(retrieved.map(String.init) ?? "nil") attempted \(s + 1)")
    // The same write through the throwing API, to report whether the store accepted it. When the
    // plain store succeeded this writes the same bytes again, which changes nothing.
    do {
        try storage.storeOrThrow(s + 1, forKey: "streak")
        printLine("storeOrThrow ok")
    } catch {
        printLine("storeOrThrow threw \(describeCode(error))")
    }
}

/// `launch-streak <insideDir> <name> [--wait]`.
func launchStreak(_ arguments: [String]) {
    let wait = arguments.count == 5
    if wait && arguments[4] != "--wait" {
        fail("unknown option '\(arguments[4])' (launch-streak takes only --wait)", code: 64)
    }
    let storage = TinyStorage(
        insideDirectory: URL(fileURLWithPath: arguments[2], isDirectory: true), name: arguments[3],
        logger: StandardErrorLogger())
    runLaunchLogic(storage)
    guard wait else { return }
    printLine("waiting")
    let outcome = SharedOutcome<String?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        do {
            try await storage.waitUntilAvailable(
                timeout: .seconds(120), pollInterval: .milliseconds(20), clock: ContinuousClock())
            outcome.set("available")
        } catch {
            outcome.set("gave up \(describeCode(error))")
        }
        done.signal()
    }
    done.wait()
    let result = outcome.get() ?? "gave up"
    printLine(result)
    guard result == "available" else { exit(1) }
    runLaunchLogic(storage)
}

/// A value shared between the waiting task and the main thread.
final class SharedOutcome<Value: Sendable>: @unchecked Sendable {
    // @unchecked: `value` is only touched while holding `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func get() -> Value { lock.withLock { value } }
    func set(_ newValue: Value) { lock.withLock { value = newValue } }
}

#endif
