import Foundation

/// The `UserDefaults` competitor: a suite of its own, deleted at teardown.
///
/// NB: swift-corelibs-foundation keeps suites as `<name>.plist` in `$XDG_CONFIG_HOME` (default
/// `~/.config`), a path it reads from the environment at process start, so it cannot be redirected
/// from inside the benchmark. Every suite is named `tinystorage-bench-<pid>-…`, deleted with its
/// file at teardown, and files left by a crashed run (whose pid is gone) are deleted on the next.
/// On Apple platforms the files live in `~/Library/Preferences`, under `cfprefsd`'s control.
final class UserDefaultsSuite {
    static let prefix = "tinystorage-bench-"

    let name: String
    let defaults: UserDefaults

    init(_ label: String) {
        Self.removeLeftovers()
        name = "\(Self.prefix)\(getpid())-\(label)"
        // NB: a suite name is always accepted on Linux; `nil` would be a bug in the benchmark.
        defaults = UserDefaults(suiteName: name)!
    }

    /// Where corelibs Foundation writes the suite `name`, as `<directory>/<name>.plist`.
    static var directory: URL {
        #if canImport(Darwin)
        return FileManager.default.homeDirectoryForCurrentUser
            .appendingPathComponent("Library/Preferences")
        #else
        if let xdg = ProcessInfo.processInfo.environment["XDG_CONFIG_HOME"], xdg.hasPrefix("/") {
            return URL(fileURLWithPath: xdg)
        }
        return FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".config")
        #endif
    }

    static func plistURL(suite: String) -> URL { directory.appendingPathComponent("\(suite).plist") }

    var plistURL: URL { Self.plistURL(suite: name) }

    /// Forgets the suite and deletes its file.
    func destroy() {
        defaults.removePersistentDomain(forName: name)
        try? FileManager.default.removeItem(at: plistURL)
    }

    /// Deletes suite files left behind by benchmark processes that no longer exist.
    static func removeLeftovers() {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        for file in files where file.hasPrefix(prefix) && file.hasSuffix(".plist") {
            let pid = file.dropFirst(prefix.count).prefix { $0.isNumber }
            guard let pid = Int32(pid), pid != getpid(), kill(pid, 0) != 0 else { continue }
            try? FileManager.default.removeItem(at: directory.appendingPathComponent(file))
        }
    }
}
