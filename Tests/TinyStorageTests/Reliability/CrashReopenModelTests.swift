import Foundation
import Testing

@testable import TinyStorage

/// Random operations against a `[String: Data]` model, with crashes in between: the instance is
/// dropped and the store reopened, sometimes after cutting the file inside a commit whose call
/// never returned (a crash mid-write) or after appending garbage (a torn write's leftovers). After
/// every crash the store must hold exactly the model: every acknowledged commit, nothing else.
///
/// `ModelBasedTests` covers long runs across compactions without crashes. The seed is printed in
/// every failure; set `TINYSTORAGE_TEST_SEED` to replay it.
@Suite struct CrashReopenModelTests {
    /// Sets the lock page back to say `length` was committed, as it was before the last commit's
    /// publish, which a crash in the middle of its append never reached.
    func unpublish(_ storage: TinyStorage, to length: Int) throws {
        let (coordination, generation) = storage.engine.state.withLock { ($0.coordination.file, $0.log.generation) }
        let page = try #require(coordination)
        try page.lock()
        page.publish(generation: generation, length: length)
        page.unlock()
    }

    /// Ends `storage` the way a process killed in the middle of an append does, leaving
    /// `remains` at `offset` of the data file at `url` and nothing after them.
    ///
    /// With the robust mutex (Linux) the remains lie in space allocated ahead, and the death is
    /// told to the next holder: a thread takes the lock and ends holding it; then the test takes
    /// the lock as the next committer would, which has every process check the file from its
    /// start. With `flock`, the file ends with the remains.
    func crashMidAppend(_ storage: TinyStorage, file url: URL, leaving remains: Data, at offset: Int) throws {
        let coordination = try #require(storage.engine.state.withLock { $0.coordination.file })
        let mapped = coordination.reportsDeadHolders
        if mapped {
            let taken = DispatchSemaphore(value: 0)
            Thread {
                _ = try? coordination.lock(excludingOlderVersions: false)
                taken.signal()
            }.start()
            taken.wait()
        } else {
            try truncateFile(url, to: offset)
        }
        let handle = try FileHandle(forWritingTo: url)
        try handle.seek(toOffset: UInt64(offset))
        try handle.write(contentsOf: remains)
        try handle.close()
        if mapped {
            #expect(try coordination.lock(excludingOlderVersions: false), "the next holder was not told")
            coordination.unlock(excludingOlderVersions: false)
        }
    }

    @Test func randomOperationsSurviveRandomCrashes() throws {
        let seed = SeededGenerator.makeSeed()
        var generator = SeededGenerator(seed: seed)
        try withTemporaryDirectory { directory throws in
            // NB: no file watch and no background flush: another thread of the instance being
            // "crashed" must not catch up, cut or flush behind the test's back.
            let quiet = Engine.Options(backgroundFlushes: false, watchesChanges: false)
            var storage = openStore(directory, options: quiet)
            var model: [String: Data] = [:]
            let keys = (0..<12).map { "key\($0)" }
            var crashes = (clean: 0, midWrite: 0, garbage: 0)
            let dataURL = directory.appendingPathComponent("store/store.tinystorage")

            func committedEnd() -> Int { storage.engine.state.withLock { $0.log.end } }
            func reopen(_ context: String) throws {
                storage = openStore(directory, options: quiet)
                #expect(try storage.rawJSON() == model, "\(context): after reopening")
            }
            func randomValue(_ step: Int) -> any Encodable & Sendable {
                Bool.random(using: &generator)
                    ? Int.random(in: -500...500, using: &generator)
                    : "\(step):" + String(repeating: "v", count: Int.random(in: 0...120, using: &generator))
            }

            for step in 0..<1_200 {
                let context = "seed \(seed), step \(step)"
                let key = keys.randomElement(using: &generator) ?? "key0"
                switch Int.random(in: 0..<100, using: &generator) {
                case 0..<35:
                    try storage.storeOrThrow(randomValue(step), forKey: key)
                    model[key] = try storage.rawJSON(forKey: key)
                case 35..<45:
                    try storage.storeOrThrow(nil, forKey: key)
                    model[key] = nil
                case 45..<55:
                    let current = model[key].map { Int(String(decoding: $0, as: UTF8.self)) }
                    if let current, current == nil {
                        expectError(.decodingFailed) { try storage.incrementIntegerOrThrow(forKey: key) }
                    } else {
                        let result = try storage.incrementIntegerOrThrow(forKey: key, by: 3)
                        #expect(result == (current.flatMap { $0 } ?? 0) + 3, "\(context)")
                        model[key] = Data(String(result).utf8)
                    }
                case 55..<63:
                    var items: [String: any Encodable] = [:]
                    for _ in 0..<Int.random(in: 1...4, using: &generator) {
                        items[keys.randomElement(using: &generator) ?? "key0"] = step
                    }
                    try storage.bulkStoreOrThrow(items: items)
                    for itemKey in items.keys { model[itemKey] = Data(String(step).utf8) }
                case 63..<65:
                    try storage.resetOrThrow()
                    model.removeAll()
                case 65..<77:
                    // A crash in the middle of a commit: its record only partly reached the file,
                    // and its call never returned, so the model does not change.
                    let acknowledged = committedEnd()
                    try storage.storeOrThrow("\(step) never acknowledged", forKey: key)
                    let written = committedEnd()
                    let cut = Int.random(in: acknowledged..<written, using: &generator)
                    try unpublish(storage, to: acknowledged)  // the crash came before the publish
                    try crashMidAppend(storage, file: dataURL, leaving: Data(count: written - cut), at: cut)
                    storage = TinyStorage.inMemory(logger: TestLogger())  // the crashed instance is gone
                    try reopen("\(context): cut at \(cut) in \(acknowledged)..<\(written)")
                    #expect(committedEnd() == acknowledged, "\(context)")
                    #expect(
                        storage.recoveryReports.map(\.isInterruptedWrite) == (cut == acknowledged ? [] : [true]),
                        "\(context)")
                    crashes.midWrite += 1
                case 77..<83:
                    // The leftovers of a torn write after the last commit.
                    let acknowledged = committedEnd()
                    let garbage = Data.random(count: Int.random(in: 1...40, using: &generator), using: &generator)
                    try crashMidAppend(storage, file: dataURL, leaving: garbage, at: acknowledged)
                    storage = TinyStorage.inMemory(logger: TestLogger())
                    try reopen("\(context): garbage after \(acknowledged)")
                    #expect(committedEnd() == acknowledged, "\(context)")
                    crashes.garbage += 1
                case 83..<90:
                    // A crash between commits.
                    storage = TinyStorage.inMemory(logger: TestLogger())
                    try reopen(context)
                    crashes.clean += 1
                default:
                    break
                }
                #expect(try storage.rawJSON(forKey: key) == model[key], "\(context): \(key)")
            }
            #expect(crashes.midWrite > 0 && crashes.garbage > 0 && crashes.clean > 0, "seed \(seed)")
            #expect(try openStore(directory).rawJSON() == model, "seed \(seed): final reopen")
        }
    }
}
