import Foundation
import Testing
import TinyStorage

/// Issue 13 with a real other process: a read that upgrades a value stored in an older shape
/// writes it back only if the key still holds the bytes it read. When another process — here, a
/// newer version of the app — writes the key between the read and the write-back, its value wins.
@Suite struct TypeMigrationRaceTests {
    /// Release 1's shape.
    struct ProfileV1: Codable, Sendable, Equatable {
        var name: String
    }

    /// The shape this process reads.
    struct Profile: Codable, Sendable, Equatable {
        var displayName: String
        var age: Int
    }

    @Test func aWriteFromAnotherProcessWinsOverTheWriteBack() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow(ProfileV1(name: "Ada"), forKey: "profile")
            let newer = #"{"age":37,"displayName":"Ada L."}"#
            // NB: the other process writes while this read is between reading the bytes and
            // writing the upgrade back: the migration closure runs exactly there, with no lock held.
            let writer = HelperRunOnce(["write-json", directory.path, "store", "profile", newer])
            let key = TinyStorage.Key("profile", default: Profile(displayName: "", age: 0))
                .migrating(from: ProfileV1.self) { old in
                    writer.run()
                    return Profile(displayName: old.name, age: 0)
                }

            // This read answers the value it read, upgraded; the other process's write stays.
            #expect(try storage.value(for: key) == Profile(displayName: "Ada", age: 0))
            let helper = try #require(try writer.outcome?.get())
            #expect(helper.status == 0, "\(helper.errors)")
            let stored = try Helper.run(["dump", directory.path, "store"])
            #expect(stored.output == [#"{"key":"profile","value":\#(newer)}"#])
            #expect(storage.typeMigrationReports.isEmpty)

            // The next read finds the newer process's value, in the current shape.
            #expect(try storage.value(for: key) == Profile(displayName: "Ada L.", age: 37))
            #expect(storage.typeMigrationReports.isEmpty)
        }
    }
}

/// Runs the helper with fixed arguments the first time ``run()`` is called, never again, and
/// keeps what it returned.
final class HelperRunOnce: @unchecked Sendable {
    typealias Outcome = Result<(status: Int32, output: [String], errors: String), any Error>

    // @unchecked: `arguments` and `result` are only touched while holding `lock`.
    private let lock = NSLock()
    private var arguments: [String]?
    private var result: Outcome?

    init(_ arguments: [String]) { self.arguments = arguments }

    func run() {
        guard
            let arguments = locked({ () -> [String]? in
                defer { self.arguments = nil }; return self.arguments
            })
        else { return }
        let outcome = Outcome { try Helper.run(arguments) }
        locked { result = outcome }
    }

    /// What the helper returned, once it ran.
    var outcome: Outcome? { locked { result } }

    private func locked<R>(_ body: () -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }
}
