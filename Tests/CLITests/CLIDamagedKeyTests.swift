import Foundation
import Testing
import TinyStorage

/// Issue 34, item 5: a key the damage may have hit is never called "not in the store" (exit 1, on
/// which a script falls back to a default): `read` exits with 7, prints nothing, and says why;
/// `verify` names the keys at risk, as the library's recovery report does.
@Suite struct CLIDamagedKeyTests {
    let sandbox: CLISandbox
    /// `streak = 364, name = "Ada", streak = 365, other = 1`, written by the library.
    let store: String
    /// Where each record ends: `ends[k]` is the offset just past record `k` (0: the header).
    let ends: [Int]

    init() throws {
        sandbox = try CLISandbox()
        store = sandbox.path("settings")
        let storage = TinyStorage(insideDirectory: sandbox.root, name: "settings", logger: QuietLogger())
        var ends = [DataFileBytes.headerSize]
        let writes: [(String, any Encodable & Sendable)] = [
            ("streak", 364), ("name", "Ada"), ("streak", 365), ("other", 1),
        ]
        for (key, value) in writes {
            try storage.storeOrThrow(value, forKey: key)
            ends.append(DataFileBytes.logicalEnd(try #require(sandbox.dataFile(store))))
        }
        // NB: on stable storage, as the tool's own writes are: damage to it is damage, not the
        // newest commits lost to a power cut, and the library names the keys the tool names.
        try storage.synchronize()
        self.ends = ends
    }

    /// Flips the last byte of record `index` (a byte of its value, so its key still reads).
    func damageValue(ofRecord index: Int) throws {
        var bytes = try #require(sandbox.dataFile(store))
        bytes[ends[index] - 1] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: store + "/store.tinystorage"))
    }

    @Test func aKeyWhoseLatestValueIsDamagedCannotBeToldAndPrintsNothing() throws {
        try damageValue(ofRecord: 3)  // streak = 365
        let before = sandbox.snapshot(store)
        let result = try sandbox.run("read", store, "streak")
        result.expectFailure(7, "cannot tell the value of \"streak\": the store '\(store)' is damaged")
        #expect(result.stderr.contains("the damaged bytes held it"))
        #expect(result.stderr.contains("holds a value for it that may be older than it should be"))
        try sandbox.run("read", store, "streak", "--raw").expectFailure(7, "cannot tell the value of \"streak\"")
        #expect(sandbox.snapshot(store) == before, "reading changed the damaged store")
    }

    @Test func aKeyWhoseOnlyRecordIsDamagedIsNotCalledAbsent() throws {
        try damageValue(ofRecord: 2)  // name = "Ada"
        let result = try sandbox.run("read", store, "name")
        result.expectFailure(7, "cannot tell the value of \"name\"")
        #expect(result.stderr.contains("what verifies holds no value for it"))
        #expect(!result.stderr.contains("no key"))
    }

    @Test func aKeyTheDamageDidNotHoldReadsAsUsual() throws {
        try damageValue(ofRecord: 2)  // name = "Ada"
        let result = try sandbox.run("read", store, "other")
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(result.output == "1\n")
        let missing = try sandbox.run("read", store, "missing")
        #expect(missing.status == 1, "stderr: \(missing.stderr)")
        #expect(
            missing.stderr.hasSuffix(
                "error: no key \"missing\" in the store '\(store)'. `tinystorage keys '\(store)'` lists its keys.\n"))
    }

    @Test func damageThatNamesNoKeyLeavesNoKeyToldNorAbsent() throws {
        var bytes = try #require(sandbox.dataFile(store))
        bytes.replaceSubrange(ends[2]..<ends[2] + 4, with: [0xF0, 0xFF, 0xFF, 0xFF])  // streak = 365's length
        try bytes.write(to: URL(fileURLWithPath: store + "/store.tinystorage"))
        try sandbox.run("read", store, "other").expectFailure(7, "the damaged bytes name no key")
        try sandbox.run("read", store, "missing").expectFailure(7, "what verifies holds no value for it")
        let verify = try sandbox.run("verify", store)
        #expect(verify.status == 7)
        #expect(verify.output.contains("at risk:     any key: the damaged bytes name none"), "\(verify.output)")
    }

    @Test func verifyNamesTheKeysTheDamageMayHaveHit() throws {
        try damageValue(ofRecord: 3)
        let result = try sandbox.run("verify", store)
        #expect(result.status == 7, "stderr: \(result.stderr)")
        #expect(result.output.contains("at risk:     \"streak\"\n"), "\(result.output)")
        // What the library reports when it repairs the store names the same keys.
        let storage = TinyStorage(insideDirectory: sandbox.root, name: "settings", logger: QuietLogger())
        #expect(storage.recoveryReports.map(\.possiblyAffectedKeys) == [["streak"]])
    }

    @Test func anInterruptedLastWriteIsNoDamageToAKey() throws {
        // The start of a record, cut short where a write stopped by a crash leaves it.
        let bytes = try #require(sandbox.dataFile(store))
        let torn = bytes.prefix(ends[4]) + [64, 0, 0, 0] + Array("torn!!".utf8) + bytes.dropFirst(ends[4] + 10)
        try torn.write(to: URL(fileURLWithPath: store + "/store.tinystorage"))
        #expect(try sandbox.run("read", store, "streak").output == "365\n")
        let verify = try sandbox.run("verify", store)
        #expect(verify.status == 8)
        #expect(!verify.output.contains("at risk:"))
    }
}

/// Drops what the library logs: a test that damages a store on purpose has no use for the error.
struct QuietLogger: TinyStorageLogging {
    func log(_ level: TinyStorageLogLevel, _ message: String, file: String, function: String, line: Int) {}
}
