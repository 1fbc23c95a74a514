import Foundation
import Testing

/// Runs `body` with a real, empty `UserDefaults` suite under a unique name, removed afterwards.
///
/// `body` gets a `write` closure that fills the suite through one instance and flushes it to disk,
/// and the suite's name, so tests can read it back through a fresh instance as an app would after
/// a relaunch (corelibs then returns values as they come out of the property list).
func withUserDefaultsSuite<R>(_ body: (_ suiteName: String) throws -> R) throws -> R {
    let suiteName = "TinyStorageMigrationTests-\(UUID().uuidString)"
    let defaults = try #require(UserDefaults(suiteName: suiteName))
    defer { defaults.removePersistentDomain(forName: suiteName) }
    return try body(suiteName)
}

/// Writes `values` into the suite `suiteName`, flushes it, and returns a fresh instance reading it.
func fillUserDefaults(_ suiteName: String, _ values: [String: Any]) throws -> UserDefaults {
    let writer = try #require(UserDefaults(suiteName: suiteName))
    for (key, value) in values { writer.set(value, forKey: key) }
    writer.synchronize()
    return try #require(UserDefaults(suiteName: suiteName))
}
