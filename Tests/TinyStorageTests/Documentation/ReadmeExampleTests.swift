import Foundation
import Testing
import TinyStorage

// The README's example, as written there except for the directory, so it cannot drift from the API.

extension TinyStorage.Key where Value == Int {
    fileprivate static var readmeStreak: Self { .init("streak", default: 0) }
}

private enum Account: String, TinyStorageKeyGroup { case userName, token }

@Suite struct ReadmeExampleTests {
    @Test func theReadmeExampleRunsAsWritten() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("readme-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = TinyStorage(insideDirectory: directory, name: "settings")

        storage[.readmeStreak] = 364
        let streak = try storage.value(for: .readmeStreak)
        #expect(streak == 364)
        try storage.update(.readmeStreak) { $0 += 1 }
        storage.group(Account.self).store("ada", forKey: .userName)
        #expect(storage.retrieve(type: String.self, forKey: "Account.userName") == "ada")
        #expect(storage.incrementInteger(forKey: "launches") == 1)
        for await value in storage.values(forKey: "streak", as: Int.self) {
            #expect(value == 365)
            break
        }
        #expect(TinyStorage(insideDirectory: directory, name: "settings")[.readmeStreak] == 365)
    }

    @Test func applicationSupportDirectoryExists() {
        // The README opens its store there; it must resolve on every platform we test.
        let support = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)
        #expect(!support.isEmpty)
    }
}
