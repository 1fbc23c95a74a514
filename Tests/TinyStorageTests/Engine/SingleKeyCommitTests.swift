import Dispatch
import Foundation
import Testing

@testable import TinyStorage

/// `store`, `set` and `remove` commit one key through a shorter path than every other commit
/// (`Engine.commitSingleKey`). These tests hold it to the general path (`Engine.commit`): the
/// same bytes on disk, the same entries, the same changes delivered, for every kind of
/// single-key commit.
@Suite struct SingleKeyCommitTests {
    /// Records every change set the engine delivers, in place of the store.
    final class ChangeRecorder: EngineListener, @unchecked Sendable {
        // @unchecked: `changes` is only touched under `lock`.
        private let lock = NSLock()
        private var changes: [ChangeSet] = []

        func engineDidChange(_ changes: [ChangeSet]) { lock.withLock { self.changes.append(contentsOf: changes) } }
        func engineDidAnnounce(_ changes: [ChangeSet]) {}
        var recorded: [ChangeSet] { lock.withLock { changes } }
    }

    /// One step of a run: set (or, with `nil`, remove) `key`.
    struct Step {
        var key: String
        var value: StoredValue?
        var writeID: String?
    }

    static func randomSteps(count: Int, using generator: inout SeededGenerator) -> [Step] {
        let keys = ["a", "key-000500", "a longer key that is not stored inline", "ключ", ""]
        var steps: [Step] = []
        for _ in 0..<count {
            let key = keys.randomElement(using: &generator) ?? "a"
            let writeID = Bool.random(using: &generator) ? nil : "writer-\(Int.random(in: 0..<3, using: &generator))"
            let value: StoredValue?
            switch Int.random(in: 0..<10, using: &generator) {
            case 0..<2:
                value = nil  // a removal, of a key that may not be there
            case 2..<5:
                // Often the value the key already holds.
                value = StoredValue(Data(String(Int.random(in: 0..<4, using: &generator)).utf8), kind: .json)
            case 5..<7:
                let text = String(repeating: "s", count: Int.random(in: 0..<200, using: &generator))
                value = StoredValue(Data("\"\(text)\"".utf8), kind: .json)
            case 7:
                // Larger than the buffer records are encoded in.
                value = StoredValue(Data.random(count: 5_000, using: &generator), kind: .data)
            case 8:
                value = StoredValue(Data("1".utf8), kind: .data)  // the bytes of JSON `1`, another kind
            default:
                value = StoredValue(Data(), kind: .data)
            }
            steps.append(Step(key: key, value: value, writeID: writeID))
        }
        return steps
    }

    /// Runs `steps` on `storage` through the short path, or through the general one.
    static func run(_ steps: [Step], on storage: TinyStorage, shortPath: Bool) throws {
        for step in steps {
            if shortPath {
                try storage.engine.commitSingleKey(step.value, forKey: step.key, writeID: step.writeID)
            } else {
                try storage.engine.commit { entries in
                    guard entries[step.key]?.stored != step.value else { return Engine.Plan(commit: nil, result: ()) }
                    let operation: LogOperation =
                        if let value = step.value {
                            .put(key: step.key, value: value.bytes, kind: value.kind)
                        } else {
                            .remove(key: step.key)
                        }
                    return Engine.Plan(commit: LogCommit(writeID: step.writeID, operations: [operation]), result: ())
                }
            }
        }
    }

    static let deterministic = Engine.Options(backgroundFlushes: false, watchesChanges: false)

    /// Where the records go: copied into a mapping of the file (Linux), written with `pwrite`
    /// (Apple platforms' path), or nowhere (a store in memory).
    enum Medium: String, CaseIterable, CustomTestStringConvertible {
        case mapping, pwrite, memory
        var testDescription: String { rawValue }
    }

    /// - Parameter carryingValues: Whether change sets carry the new values (once a value stream
    ///   was opened), or only the keys.
    @Test(arguments: Medium.allCases, [false, true])
    func theShortPathCommitsWhatTheGeneralPathCommits(medium: Medium, carryingValues: Bool) throws {
        let inMemory = medium == .memory
        var options = Self.deterministic
        options.usesFileLock = medium == .pwrite
        let seed = SeededGenerator.makeSeed()
        var generator = SeededGenerator(seed: seed)
        let steps = Self.randomSteps(count: 400, using: &generator)
        try withTemporaryDirectory { directory throws in
            var stores: [TinyStorage] = []
            var recorders: [ChangeRecorder] = []
            for name in ["short", "general"] {
                let storage =
                    inMemory
                    ? TinyStorage.inMemory()
                    : openStore(directory, name: name, options: options)
                let recorder = ChangeRecorder()
                storage.engine.setListener(recorder)
                if carryingValues { storage.engine.carryValuesInChanges() }
                try Self.run(steps, on: storage, shortPath: name == "short")
                storage.engine.delivery.waitUntilDelivered()
                stores.append(storage)
                recorders.append(recorder)
            }
            let (short, general) = (stores[0], stores[1])
            #expect(try short.rawJSON() == general.rawJSON(), "seed \(seed)")
            let entries = try short.engine.withLiveEntries { $0.mapValues(\.stored) }
            #expect(try entries == general.engine.withLiveEntries { $0.mapValues(\.stored) }, "seed \(seed)")
            let (shortChanges, generalChanges) = (recorders[0].recorded, recorders[1].recorded)
            #expect(shortChanges.count == generalChanges.count, "seed \(seed)")
            #expect(!shortChanges.isEmpty)
            // NB: the first difference only: the lists run to hundreds of change sets.
            let difference = zip(shortChanges, generalChanges).first { $0 != $1 }
            #expect(difference == nil, "seed \(seed): the changes delivered differ")
            let state = short.engine.state.withLock { ($0.log.sequence, $0.index.builtLiveBytes) }
            #expect(
                state == general.engine.state.withLock { ($0.log.sequence, $0.index.builtLiveBytes) }, "seed \(seed)")
            guard !inMemory else { return }
            #expect(
                try Data(contentsOf: short.fileURL) == Data(contentsOf: general.fileURL),
                "seed \(seed): the files differ")
            #expect(
                try openStore(directory, name: "short", options: options).rawJSON() == general.rawJSON(), "seed \(seed)"
            )
        }
    }

    /// Where the short path does not apply (another process committed since the store last
    /// looked, a file of the older format, the remains of a dead writer's append), the commit
    /// takes the general path: it still lands, exactly once, after what it must follow.
    @Test func aCommitTheShortPathCannotTakeTakesTheGeneralPath() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory, options: Self.deterministic)
            let other = openStore(directory, options: Self.deterministic)
            try storage.storeOrThrow(1, forKey: "a")
            // Another instance (as another process would) commits: `storage` is not current.
            try other.storeOrThrow(2, forKey: "b")
            #expect(!storage.engine.state.withLock { $0.isCurrent })
            try storage.storeOrThrow(3, forKey: "a")
            #expect(try storage.rawJSON() == ["a": Data("3".utf8), "b": Data("2".utf8)])
            // A dead writer's remains: cut before the record is appended.
            storage.engine.state.withLock { $0.log.mayHaveDeadTail = true }
            try storage.storeOrThrow(4, forKey: "a")
            #expect(!storage.engine.state.withLock { $0.log.mayHaveDeadTail })
            let reopened = openStore(directory)
            #expect(try reopened.rawJSON() == ["a": Data("4".utf8), "b": Data("2".utf8)])
            try other.storeOrThrow(nil, forKey: "b")
            try storage.storeOrThrow(nil, forKey: "b")  // already removed by the other instance
            #expect(try openStore(directory).rawJSON() == ["a": Data("4".utf8)])
        }
    }
}
