import Foundation
import Testing

/// A folder of the original TinyStorage library: read as it is, adopted by the first write.
@Suite struct CLIOriginalStoreTests {
    let sandbox: CLISandbox
    let store: String
    let plist: Data

    init() throws {
        sandbox = try CLISandbox()
        store = sandbox.path("settings")
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: false)
        let values: [String: Data] = ["streak": Data("364".utf8), "name": Data(#""Ada""#.utf8)]
        plist = try PropertyListSerialization.data(fromPropertyList: values, format: .binary, options: 0)
        try plist.write(to: URL(fileURLWithPath: store + "/tiny-storage.plist"))
    }

    @Test func readingCommandsShowTheOriginalValuesWithoutAdoptingThem() throws {
        let before = sandbox.snapshot(store)
        let keys = try sandbox.run("keys", store)
        keys.expectSuccess()
        #expect(keys.output == "name\nstreak\n")
        #expect(try sandbox.run("read", store, "streak").output == "364\n")
        // Adopted values keep their kind ("original") through an export and an import.
        #expect(
            try sandbox.run("export", store).output
                == "{\n  \"name\": \"Ada\",\n  \"streak\": 364,\n"
                + "  \"$tinystorage.kinds\": {\"name\": \"original\", \"streak\": \"original\"}\n}\n")
        let info = try sandbox.run("info", store)
        info.expectSuccess()
        #expect(info.output.contains("format:      the original TinyStorage's tiny-storage.plist, not adopted yet\n"))
        let verify = try sandbox.run("verify", store)
        verify.expectSuccess()
        #expect(verify.output.contains("keys:        2\n"))
        #expect(sandbox.snapshot(store) == before, "a reading command adopted or changed the store")
    }

    @Test func theFirstWriteAdoptsTheOriginalAndKeepsIt() throws {
        let write = try sandbox.run("write", store, "streak", "365")
        #expect(write.status == 0)
        #expect(write.stderr.hasPrefix("note: adopted the original TinyStorage file tiny-storage.plist"))
        #expect(
            try sandbox.run("export", store).output
                == "{\n  \"name\": \"Ada\",\n  \"streak\": 365,\n  \"$tinystorage.kinds\": {\"name\": \"original\"}\n}\n"
        )
        #expect(FileManager.default.contents(atPath: store + "/tiny-storage.plist") == plist)
        try sandbox.run("verify", store).expectSuccess()
    }

    @Test func anUnparsableOriginalFileIsReportedAndLeftAlone() throws {
        let garbage = Data("not a plist".utf8)
        try garbage.write(to: URL(fileURLWithPath: store + "/tiny-storage.plist"))
        try sandbox.run("keys", store).expectFailure(4, "is not the original TinyStorage's dictionary of values")
        let write = try sandbox.run("write", store, "streak", "365")
        #expect(write.status == 4, "stderr: \(write.stderr)")
        #expect(FileManager.default.contents(atPath: store + "/tiny-storage.plist") == garbage)
        #expect(!sandbox.exists(store + "/store.tinystorage"))
    }
}
