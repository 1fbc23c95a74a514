import Foundation
import Testing
import TinyStorage

/// Values that expire, as the tool shows them (issue 33, item 3): the default outputs leave out
/// what has expired, as a script expects of a missing key; `read` notes on standard error when a
/// value expires, `keys --expiring` lists deadlines, `info` counts, `write --expires-after` stores
/// one. Values already past their deadline are planted with a deadline in 1970, so nothing here
/// waits for time to pass.
@Suite struct CLIExpiryTests {
    let sandbox: CLISandbox
    let store: String

    init() throws {
        sandbox = try CLISandbox()
        store = sandbox.path("settings")
    }

    func library() -> TinyStorage { TinyStorage(insideDirectory: sandbox.root, name: "settings") }

    /// `2025-01-01T00:10:00.000Z`, as the tool prints a deadline.
    func timestamp(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    @Test func writeExpiresAfterStoresADeadlineThatReadKeysAndInfoShow() throws {
        try sandbox.run("write", store, "token", "--string", "abc", "--expires-after", "3600").expectSuccess()
        try sandbox.run("write", store, "code", "42", "--expires-after", "90.5").expectSuccess()
        try sandbox.run("write", store, "plain", "1").expectSuccess()
        let storage = library()
        let token = try #require(try storage.expiration(forKey: "token"))
        let code = try #require(try storage.expiration(forKey: "code"))
        #expect(token.timeIntervalSince(code) > 3000, "an hour against a minute and a half")
        #expect(try storage.expiration(forKey: "plain") == nil)

        // NB: how far away the deadline is depends on how long the commands took: not checked.
        let read = try sandbox.run("read", store, "token")
        #expect(read.status == 0)
        #expect(read.output == "\"abc\"\n", "standard output is the value alone")
        #expect(read.stderr.hasPrefix("note: \"token\" expires at \(timestamp(token)) (in "), "\(read.stderr)")
        #expect(read.stderr.hasSuffix(").\n"))
        #expect(try sandbox.run("read", store, "plain").stderr.isEmpty, "no note for a value that never expires")
        let raw = try sandbox.run("read", store, "code", "--raw")
        #expect(raw.output == "42")

        #expect(try sandbox.run("keys", store).output == "code\nplain\ntoken\n")
        let expiring = try sandbox.run("keys", store, "--expiring")
        expiring.expectSuccess()
        #expect(expiring.output == "code\t\(timestamp(code))\ntoken\t\(timestamp(token))\n", "soonest first")

        let info = try sandbox.run("info", store)
        info.expectSuccess()
        #expect(info.output.contains("format:      version 3, "))
        #expect(info.output.contains("keys:        3\n"))
        #expect(info.output.contains("expiring:    2 keys, the next \"code\" at \(timestamp(code)) (in "))
        #expect(!info.output.contains("expired:"))
    }

    @Test func expiredValuesAreAbsentFromEveryDefaultOutputUntilACompactionRemovesThem() throws {
        try sandbox.run("write", store, "plain", "1").expectSuccess()
        let secret = "expired-\(UUID().uuidString)"
        // NB: a deadline in 1970, through the raw access the tool itself uses: long past.
        try library().storeRaw([
            "gone": StoredValue(Data("\"\(secret)\"".utf8), kind: .json, deadline: Deadline(milliseconds: 1_000))
        ])
        #expect(
            String(decoding: try Data(contentsOf: URL(fileURLWithPath: store + "/store.tinystorage")), as: UTF8.self)
                .contains(secret))

        #expect(try sandbox.run("keys", store).output == "plain\n")
        #expect(try sandbox.run("keys", store, "--expiring").output == "")
        let read = try sandbox.run("read", store, "gone")
        #expect(read.status == 1, "a missing key, as for a script: \(read.stderr)")
        #expect(read.output.isEmpty)
        #expect(try sandbox.run("read", store).output == "{\n  \"plain\" : 1\n}\n")
        #expect(try sandbox.run("export", store).output == "{\n  \"plain\": 1\n}\n")
        let info = try sandbox.run("info", store)
        #expect(info.output.contains("keys:        1\n"))
        #expect(info.output.contains("expired:     1 key, read as absent; the next compaction removes their bytes\n"))
        #expect(!info.output.contains("expiring:"))

        try sandbox.run("compact", store).expectSuccess()
        #expect(
            !String(decoding: try Data(contentsOf: URL(fileURLWithPath: store + "/store.tinystorage")), as: UTF8.self)
                .contains(secret))
        #expect(!(try sandbox.run("info", store).output.contains("expired:")))
        #expect(try sandbox.run("keys", store).output == "plain\n")
    }

    @Test(arguments: ["0", "-3", "abc", "inf", "nan", "", "1e300"])
    func aLifetimeThatIsNotAPositiveNumberOfSecondsIsRefusedBeforeAnythingIsCreated(lifetime: String) throws {
        let result = try sandbox.run("write", store, "k", "1", "--expires-after", lifetime)
        #expect(result.status == 5, "\(result.stderr)")
        #expect(result.stderr.contains("--expires-after takes a number of seconds more than zero"))
        #expect(!FileManager.default.fileExists(atPath: store), "no store was created")
    }

    @Test func theHelpOfEachCommandSaysHowItShowsValuesThatExpire() throws {
        #expect(try sandbox.run("write", "--help").output.contains("--expires-after <seconds>"))
        #expect(try sandbox.run("keys", "--help").output.contains("--expiring"))
        #expect(try sandbox.run("read", "--help").output.contains("expires"))
        #expect(try sandbox.run("info", "--help").output.contains("expiring line"))
    }
}
