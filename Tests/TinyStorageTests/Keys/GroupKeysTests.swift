import Foundation
import Testing

@testable import TinyStorage

// Issue 33, item 6: every key of a group, and removing them all in one commit.

/// A `CaseIterable` group whose declaration order is not alphabetical.
private enum Profile: String, TinyStorageKeyGroup, CaseIterable {
    case zipCode, name, avatar, email
}

/// The same case names in a group that is not `CaseIterable`.
private enum Draft: String, TinyStorageKeyGroup {
    case zipCode, name, avatar, email
}

/// A group that is not an enum, whose `init(rawValue:)` accepts any spelling of a tag.
private struct Tag: TinyStorageKeyGroup {
    var rawValue: String
    init?(rawValue: String) { self.rawValue = rawValue.lowercased() }
}

/// The stored keys of `group`, asked for by code that knows only that it is a group.
private func storedKeys<Group: TinyStorageKeyGroup>(of group: Group.Type, in storage: TinyStorage) -> [Group] {
    storage.group(group).storedKeys
}

/// NB: a time limit per test: a notification that never comes fails the test, not the run.
@Suite(.timeLimit(.minutes(1))) struct GroupKeysTests {
    @Test func aCaseIterableGroupListsItsStoredKeysInDeclarationOrder() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let profile = storage.group(Profile.self)
            #expect(profile.storedKeys.isEmpty)
            for key in [Profile.email, .zipCode, .avatar] { try profile.storeOrThrow(key.rawValue, forKey: key) }

            #expect(profile.storedKeys == [.zipCode, .avatar, .email])
            #expect(storedKeys(of: Profile.self, in: storage) == [.zipCode, .avatar, .email])
            #expect(openStore(directory).group(Profile.self).storedKeys == [.zipCode, .avatar, .email])
        }
    }

    @Test func anotherGroupListsItsStoredKeysSortedByStoredName() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let draft = storage.group(Draft.self)
            for key in [Draft.email, .zipCode, .avatar, .name] { try draft.storeOrThrow(1, forKey: key) }

            #expect(draft.storedKeys == [.avatar, .email, .name, .zipCode])
            #expect(storedKeys(of: Draft.self, in: storage) == [.avatar, .email, .name, .zipCode])
        }
    }

    @Test func namesThatOnlyShareThePrefixAreNotTheGroupsAndSurviveItsReset() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let neighbours = [
                "Profile.nameOld", "Profile.name.old", "Profile.", "Profile", "Profiles.name", "profile.name",
                "Draft.name",
            ]
            for name in neighbours { try storage.storeOrThrow(name, forKey: name) }
            try storage.group(Profile.self).storeOrThrow("Ada", forKey: .name)
            #expect(storage.group(Profile.self).storedKeys == [.name])

            try storage.group(Profile.self).resetOrThrow()
            #expect(storage.group(Profile.self).storedKeys.isEmpty)
            #expect(Set(storage.allKeys.map(\.rawValue)) == Set(neighbours))
            for name in neighbours { #expect(storage.retrieve(type: String.self, forKey: name) == name) }
        }
    }

    /// A name another spelling maps to a case is not that case's stored name: the case is listed
    /// once, for its own name, and the reset removes that name only.
    @Test func onlyExactStoredNamesCountForAGroupThatAcceptsSeveralSpellings() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let red = try #require(Tag(rawValue: "red"))
            #expect(red.storedName == "Tag.red")
            try storage.storeOrThrow(1, forKey: "Tag.red")
            try storage.storeOrThrow(2, forKey: "Tag.RED")
            try storage.storeOrThrow(3, forKey: "Tag.Blue")

            #expect(storage.group(Tag.self).storedKeys == [red])
            try storage.group(Tag.self).resetOrThrow()
            #expect(Set(storage.allKeys.map(\.rawValue)) == ["Tag.RED", "Tag.Blue"])
        }
    }

    @Test func aResetIsOneCommitAnnouncedOnceNamingEveryKeyInTheGroupsOrder() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let profile = storage.group(Profile.self)
            for key in Profile.allCases.reversed() { try profile.storeOrThrow(key.rawValue, forKey: key) }
            try storage.group(Draft.self).storeOrThrow("kept", forKey: .name)
            let recordsBefore = try TinyStorage.inspect(storeDirectory: storage.fileURL.deletingLastPathComponent())
                .recordCount

            let announcements = Arrivals<(keys: [String], writeID: String?)>()
            storage.engine.delivery.waitUntilDelivered()
            let observer = NotificationCenter.default.addObserver(
                forName: TinyStorage.didChangeNotification, object: storage, queue: nil
            ) { notification in
                let keys = notification.userInfo?[TinyStorage.changedKeysUserInfoKey] as? [String] ?? []
                announcements.append((keys, notification.userInfo?[TinyStorage.writeIDUserInfoKey] as? String))
            }
            defer { NotificationCenter.default.removeObserver(observer) }

            try profile.resetOrThrow(writeID: "sign-out")
            storage.engine.delivery.waitUntilDelivered()

            let received = announcements.all
            #expect(received.count == 1)
            #expect(received.first?.keys == Profile.allCases.map(\.storedName))
            #expect(received.first?.writeID == "sign-out")
            let inspection = try TinyStorage.inspect(storeDirectory: storage.fileURL.deletingLastPathComponent())
            #expect(inspection.recordCount == recordsBefore + 1)
            #expect(profile.storedKeys.isEmpty)
            #expect(storage.group(Draft.self).retrieve(type: String.self, forKey: .name) == "kept")

            // A group with nothing stored: no commit, no announcement.
            let lengthAfter = try committedLength(storage.fileURL)
            try profile.resetOrThrow(writeID: "again")
            storage.engine.delivery.waitUntilDelivered()
            #expect(announcements.all.count == 1)
            #expect(try committedLength(storage.fileURL) == lengthAfter)
        }
    }

    @Test func anUnavailableStoreRefusesTheResetListsNothingAndKeepsEveryValue() throws {
        try withTemporaryDirectory { directory throws in
            let writer = openStore(directory)
            for key in Profile.allCases { try writer.group(Profile.self).storeOrThrow(key.rawValue, forKey: key) }
            try writer.synchronize()
            let before = try snapshot(of: directory)

            let faults = FaultSwitch()
            faults.inject(failing(.open, .accessDenied, pathEndingIn: "/store.tinystorage"))
            let logger = TestLogger()
            let storage = openStore(directory, io: faults.io, logger: logger)
            let profile = storage.group(Profile.self)

            expectError(.unavailable) { try profile.resetOrThrow() }
            profile.reset()
            #expect(profile.storedKeys.isEmpty)
            #expect(logger.texts(atLeast: .error).contains { $0.contains("unavailable") })
            #expect(try snapshot(of: directory) == before)

            faults.clear()
            #expect(profile.storedKeys == Profile.allCases)
            #expect(try snapshot(of: directory) == before)
        }
    }
}
