import Foundation
import Testing

@testable import TinyStorage

// The grouped-settings example: three groups, two of which have a `token`.
private enum AccountInfo: String, TinyStorageKeyGroup {
    case userName, age, token
}

private enum LoginInfo: String, TinyStorageKeyGroup {
    case token, userId
}

private enum DisplaySettings: String, TinyStorageKeyGroup {
    static let prefix = "display"
    case font, backgroundImage
}

private struct BackgroundImage: Codable, Sendable, Equatable {
    var name: String
    var opacity: Double
}

extension TinyStorage.Key where Value == Int {
    fileprivate static var accountAge: Self { AccountInfo.age.key(default: 18) }
}

/// Key groups: a case is stored under `prefix + "." + rawValue`, so groups never collide.
/// NB: a time limit per test: a regression here waits forever (a spin or a `for await` on a
/// marker that never comes), and should fail the test, not stall the run (tests-audit N11).
@Suite(.timeLimit(.minutes(1))) struct KeyGroupTests {
    @Test func storedNamesArePrefixDotRawValue() {
        #expect(AccountInfo.prefix == "AccountInfo")
        #expect(AccountInfo.userName.storedName == "AccountInfo.userName")
        #expect(LoginInfo.userId.storedName == "LoginInfo.userId")
        #expect(DisplaySettings.prefix == "display")
        #expect(DisplaySettings.backgroundImage.storedName == "display.backgroundImage")
        #expect(AccountInfo.age.key(default: 0).name == "AccountInfo.age")
    }

    @Test func groupPrefixesPreventCollisions() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.group(AccountInfo.self).store("account-token", forKey: .token)
            storage.group(LoginInfo.self).store("login-token", forKey: .token)
            storage.store("plain-token", forKey: "token")

            #expect(storage.group(AccountInfo.self).retrieve(type: String.self, forKey: .token) == "account-token")
            #expect(storage.group(LoginInfo.self).retrieve(type: String.self, forKey: .token) == "login-token")
            #expect(storage.retrieve(type: String.self, forKey: "token") == "plain-token")
            #expect(Set(storage.allKeys.map(\.rawValue)) == ["AccountInfo.token", "LoginInfo.token", "token"])

            storage.group(LoginInfo.self).remove(key: .token)
            #expect(storage.group(AccountInfo.self).contains(.token))
            #expect(!storage.group(LoginInfo.self).contains(.token))
        }
    }

    @Test func groupedSettingsRoundTripAcrossReopen() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let account = storage.group(AccountInfo.self)
            let login = storage.group(LoginInfo.self)
            let display = storage.group(DisplaySettings.self)
            let image = BackgroundImage(name: "beach.jpg", opacity: 0.8)

            account.store("ada", forKey: .userName)
            account[.age, default: 0] = 36
            try login.storeOrThrow("t0k3n", forKey: .token)
            login.store(42, forKey: .userId)
            display[.font, default: "SF Pro"] = "New York"
            display.store(image, forKey: .backgroundImage)

            let reopened = openStore(directory)
            #expect(reopened.group(AccountInfo.self).retrieve(type: String.self, forKey: .userName) == "ada")
            #expect(reopened.group(AccountInfo.self)[.age, default: 0] == 36)
            #expect(try reopened.group(LoginInfo.self).retrieveOrThrow(type: String.self, forKey: .token) == "t0k3n")
            #expect(reopened.group(LoginInfo.self).retrieve(type: Int.self, forKey: .userId) == 42)
            #expect(reopened.group(DisplaySettings.self)[.font, default: "SF Pro"] == "New York")
            #expect(
                reopened.group(DisplaySettings.self).retrieve(type: BackgroundImage.self, forKey: .backgroundImage)
                    == image)
            #expect(
                Set(reopened.allKeys.map(\.rawValue)) == [
                    "AccountInfo.userName", "AccountInfo.age", "LoginInfo.token", "LoginInfo.userId",
                    "display.font", "display.backgroundImage",
                ])
        }
    }

    @Test func subscriptDefaultsAreNeverWritten() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            #expect(storage.group(DisplaySettings.self)[.font, default: "SF Pro"] == "SF Pro")
            #expect(try storage.rawJSON().isEmpty)
        }
    }

    @Test func groupCasesGiveTypedKeys() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            #expect(storage[.accountAge] == 18)
            try storage.update(.accountAge) { $0 += 1 }
            #expect(storage.group(AccountInfo.self).retrieve(type: Int.self, forKey: .age) == 19)
            try storage.group(AccountInfo.self).update(.age, as: Int.self) { $0 = ($0 ?? 0) * 2 }
            #expect(try storage.value(for: .accountAge) == 38)
        }
    }

    @Test func storedKeysListsOnlyThisGroupsCases() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            storage.group(AccountInfo.self).store("ada", forKey: .userName)
            storage.group(AccountInfo.self).store(1, forKey: .age)
            storage.group(LoginInfo.self).store("t", forKey: .token)
            storage.store(1, forKey: "AccountInfo.notACase")
            #expect(Set(storage.group(AccountInfo.self).storedKeys) == [.userName, .age])
            #expect(storage.group(LoginInfo.self).storedKeys == [.token])
            #expect(storage.group(DisplaySettings.self).storedKeys.isEmpty)
        }
    }

    @Test func resettingAGroupRemovesOnlyItsCasesInOneCommit() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("TinyStorageTests-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = openStore(directory)
        storage.group(LoginInfo.self).store("t", forKey: .token)
        storage.group(LoginInfo.self).store(7, forKey: .userId)
        storage.group(AccountInfo.self).store("t", forKey: .token)
        storage.store("kept", forKey: "LoginInfo.notACase")

        let changes = storage.rawChanges()
        try storage.group(LoginInfo.self).resetOrThrow()
        storage.store(true, forKey: "marker")

        var commits: [[String]] = []
        for await change in changes {
            if change.keys == ["marker"] { break }
            commits.append(change.keys)
        }
        #expect(commits == [["LoginInfo.token", "LoginInfo.userId"]])
        #expect(storage.group(LoginInfo.self).storedKeys.isEmpty)
        #expect(storage.group(AccountInfo.self).contains(.token))
        #expect(storage.retrieve(type: String.self, forKey: "LoginInfo.notACase") == "kept")
        // Resetting an empty group writes nothing.
        let sizeBefore = try committedLength(storage.fileURL)
        storage.group(LoginInfo.self).reset()
        #expect(try committedLength(storage.fileURL) == sizeBefore)
    }
}
