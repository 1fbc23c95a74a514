import Foundation
import Testing
import TinyStorage

/// The group the helper's `watch-group` follows (Sources/TinyStorageTestHelper/GroupCommands.swift).
private enum SharedProfile: String, TinyStorageKeyGroup, CaseIterable {
    static let prefix = "profile"
    case name, email, avatar
}

/// Issue 33, item 6, with a real second process: the `watch-group` helper follows the store
/// commit by commit and says which of the group's keys it reads after each one.
///
/// The test waits for the helper's lines, never for a length of time; a ``Watchdog`` kills a
/// helper that hangs.
@Suite struct KeyGroupProcessTests {
    @Test func anotherProcessSeesTheGroupsKeysArriveAndAllLeaveInOneCommit() throws {
        try withTemporaryDirectory { directory throws in
            let watchdog = Watchdog()
            defer { watchdog.cancel() }
            let storage = openStore(directory)
            try storage.storeOrThrow("kept", forKey: "profile.nameOld")  // shares the prefix, not a case
            let watcher = watchdog.guarding(
                try HelperProcess(["watch-group", directory.path, "store"], withInput: true))
            #expect(watcher.readLine() == "ready", "\(watcher.errorOutput)")

            let profile = storage.group(SharedProfile.self)
            try profile.storeOrThrow("avatar.png", forKey: .avatar, writeID: "1")
            #expect(watcher.readLine() == #"commit profile.avatar "1" stored avatar"#, "\(watcher.errorOutput)")
            try profile.storeOrThrow("ada@example.com", forKey: .email, writeID: "2")
            #expect(watcher.readLine() == #"commit profile.email "2" stored email,avatar"#)
            try profile.storeOrThrow("Ada", forKey: .name, writeID: "3")
            #expect(watcher.readLine() == #"commit profile.name "3" stored name,email,avatar"#)

            // One commit removes all three: the very next commit the other process sees is the
            // reset, naming every key, and after it none is left; the marker shows nothing more
            // came in between.
            try profile.resetOrThrow(writeID: "sign-out")
            try storage.storeOrThrow(true, forKey: "marker", writeID: "marker")
            #expect(
                watcher.readLine() == #"commit profile.name,profile.email,profile.avatar "sign-out" stored -"#,
                "\(watcher.errorOutput)")
            #expect(watcher.readLine() == #"commit marker "marker" stored -"#)

            #expect(watcher.killHard().isEmpty)
            #expect(!watchdog.fired)

            let dump = try Helper.run(["dump", directory.path, "store"])
            #expect(dump.output == [#"{"key":"marker","value":true}"#, #"{"key":"profile.nameOld","value":"kept"}"#])
        }
    }
}
