import Foundation
import Testing
import TinyStorage

/// Issue 13 in the tool: a value the app can no longer decode (an older or newer shape of its
/// type) is shown exactly as it is stored, after any number of the app's failed reads; a `Data`
/// value keeps being shown as base64 with its note.
@Suite struct CLIUndecodableValueTests {
    let sandbox: CLISandbox
    let store: String

    init() throws {
        sandbox = try CLISandbox()
        store = sandbox.path("settings")
    }

    /// The key as an app whose type no longer matches the stored shape declares it.
    static func appKey(_ name: String) -> TinyStorage.Key<Account> {
        .init(name, default: Account(userName: "guest"))
    }

    @Test func readShowsAValueTheAppCannotDecodeAsItIsStored() throws {
        let app = TinyStorage(insideDirectory: sandbox.root, name: "settings", logger: QuietLogger())
        try app.storeOrThrow(SettingsV1(name: "Ada", dark: true), forKey: "profile")
        #expect(throws: TinyStorageError.self) { try app.value(for: Self.appKey("profile")) }
        #expect(app[Self.appKey("profile")] == Account(userName: "guest"))

        let read = try sandbox.run("read", store, "profile")
        read.expectSuccess()
        #expect(read.output == "{\n  \"dark\" : true,\n  \"name\" : \"Ada\"\n}\n")
        let raw = try sandbox.run("read", store, "profile", "--raw")
        #expect(raw.stdout == Data(#"{"dark":true,"name":"Ada"}"#.utf8))
    }

    @Test func aDataValueTheAppCannotDecodeIsStillShownAsBase64() throws {
        let app = TinyStorage(insideDirectory: sandbox.root, name: "settings", logger: QuietLogger())
        try app.storeOrThrow(Data([0, 1, 2, 0xFF]), forKey: "avatar")
        let error = #expect(throws: TinyStorageError.self) { try app.value(for: Self.appKey("avatar")) }
        #expect(error?.message.contains("Account (avatar: raw bytes (a Data value), not JSON)") == true)

        let read = try sandbox.run("read", store, "avatar")
        #expect(read.status == 0)
        #expect(read.output == "\"AAEC/w==\"\n")
        #expect(read.stderr.hasPrefix("note: \"avatar\" holds raw bytes (a Data value), shown as a base64 string"))
        #expect(try sandbox.run("read", store, "avatar", "--raw").stdout == Data([0, 1, 2, 0xFF]))
    }
}
