import Foundation
import Testing
import TinyStorage

/// G5 across real processes: what one process stored, another reads, and the other way round.
@Suite struct ReopenInNewProcessTests {
    struct Profile: Codable, Equatable, Sendable {
        var name: String
        var scores: [Double]
        var address: [String: String]?
    }

    struct DumpKey: Decodable { var key: String }
    struct DumpLine<Value: Decodable>: Decodable { var key: String; var value: Value }

    /// The value the helper's `dump` printed for `key`, decoded as `Value`.
    func dumped<Value: Decodable>(_ key: String, as: Value.Type, in lines: [String]) throws -> Value? {
        let decoder = JSONDecoder()
        for line in lines where try decoder.decode(DumpKey.self, from: Data(line.utf8)).key == key {
            return try decoder.decode(DumpLine<Value>.self, from: Data(line.utf8)).value
        }
        return nil
    }

    @Test func valuesStoredHereAreReadByAnotherProcess() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let profile = Profile(name: "Ada \"Countess\" Lovelace", scores: [1.5, -0.25, 1e-300], address: nil)
            let bytes = Data((0...255).map { UInt8($0) })
            let text = "line\nbreak \\ \"quote\" /slash ünïcødé 👩‍👩‍👧 \u{1}"
            try storage.storeOrThrow(364, forKey: "streak")
            try storage.storeOrThrow(true, forKey: "flag")
            try storage.storeOrThrow(-2.5e-8, forKey: "double")
            try storage.storeOrThrow(text, forKey: "text")
            try storage.storeOrThrow(profile, forKey: "profile")
            try storage.storeOrThrow([3, 1, 2], forKey: "list")
            try storage.storeOrThrow(bytes, forKey: "data")
            try storage.storeOrThrow(["b": [1], "a": []], forKey: "dict")
            try storage.storeOrThrow("value", forKey: "ключ/🔑 \"key\"")
            try storage.storeOrThrow(1, forKey: "removed")
            try storage.storeOrThrow(nil, forKey: "removed")

            let result = try Helper.run(["dump", directory.path, "store"])
            #expect(result.status == 0, "\(result.errors)")
            let keys = try result.output.map { try JSONDecoder().decode(DumpKey.self, from: Data($0.utf8)).key }
            #expect(Set(keys) == Set(storage.allKeys.map(\.rawValue)))
            #expect(keys.count == 9)
            #expect(try dumped("streak", as: Int.self, in: result.output) == 364)
            #expect(try dumped("flag", as: Bool.self, in: result.output) == true)
            #expect(try dumped("double", as: Double.self, in: result.output) == -2.5e-8)
            #expect(try dumped("text", as: String.self, in: result.output).map { Array($0.utf8) } == Array(text.utf8))
            #expect(try dumped("profile", as: Profile.self, in: result.output) == profile)
            #expect(try dumped("list", as: [Int].self, in: result.output) == [3, 1, 2])
            #expect(try dumped("data", as: Data.self, in: result.output) == bytes)
            #expect(try dumped("dict", as: [String: [Int]].self, in: result.output) == ["b": [1], "a": []])
            #expect(try dumped("ключ/🔑 \"key\"", as: String.self, in: result.output) == "value")
            #expect(try dumped("removed", as: Int.self, in: result.output) == nil)
            // The other process saw exactly the stored bytes.
            let raw = try storage.rawEntries()
            for line in result.output {
                let key = try JSONDecoder().decode(DumpKey.self, from: Data(line.utf8)).key
                let stored = try #require(raw[key])
                let shown =
                    stored.kind == .data
                    ? "\"\(stored.bytes.base64EncodedString())\",\"kind\":\"data\""
                    : String(decoding: stored.bytes, as: UTF8.self)
                #expect(line.hasSuffix(",\"value\":" + shown + "}"), "key \(key)")
            }
        }
    }

    @Test func aCommitByAnotherProcessIsSeenByTheNextRead() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow(1, forKey: "counter")
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "counter") == 1)

            let write = try Helper.run(["write", directory.path, "store", "counter", "41"])
            #expect(write.status == 0, "\(write.errors)")
            // The write returned in the other process, so this read must see it: no waiting.
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "counter") == 41)

            let increment = try Helper.run(["increment", directory.path, "store", "counter", "3"])
            #expect(increment.status == 0, "\(increment.errors)")
            #expect(storage.integer(forKey: "counter") == 44)
            #expect(storage.incrementInteger(forKey: "counter") == 45)

            let dump = try Helper.run(["dump", directory.path, "store"])
            #expect(dump.output == ["{\"key\":\"counter\",\"value\":45}"])
        }
    }

    @Test func anUnreadableStoreIsReportedByTheOtherProcessAndLeftAlone() throws {
        try withTemporaryDirectory { directory throws in
            let folder = directory.appendingPathComponent("store", isDirectory: true)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let file = folder.appendingPathComponent("store.tinystorage")
            let foreign = Data("{\"streak\": 364, \"this is\": \"not a TinyStorage file\"}".utf8)
            try foreign.write(to: file)

            let dump = try Helper.run(["dump", directory.path, "store"])
            #expect(dump.status != 0)
            #expect(dump.output.isEmpty)
            #expect(dump.errors.contains("unavailable"), "\(dump.errors)")
            let write = try Helper.run(["write", directory.path, "store", "streak", "1"])
            #expect(write.status != 0)
            #expect(try Data(contentsOf: file) == foreign)
        }
    }

    @Test(arguments: [
        ["bogus", "dir", "x"], ["write", "dir", "x", "key"], ["write-loop", "dir", "x", "many"], ["dump"], [],
    ])
    func theHelperRejectsBadCommandLines(arguments: [String]) throws {
        try withTemporaryDirectory { directory throws in
            let result = try Helper.run(arguments.map { $0 == "dir" ? directory.path : $0 })
            #expect(result.status == 64)
            #expect(result.errors.contains("usage:"))
            #expect(result.output.isEmpty)
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
        }
    }
}
