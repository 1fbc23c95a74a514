import Foundation
import Testing

@testable import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue 14's folder policy: a store folder must be a directory of this process's user that no
/// one else can write to, or one with the sticky bit; anything else is refused with
/// `unsafeFile` before a file in it is opened. The folder that holds it may be reached through
/// links (app and App Group containers are).
@Suite struct StoreFolderPolicyTests {
    /// Plants the issue's two links: `store.lock` to a name that does not exist outside, and
    /// `store.tinystorage` to an existing empty file outside (a root-run `tinystorage write` made
    /// the first and wrote 256 KiB into the second before issue 14).
    func plantTheIssuesLinks(in sandbox: FileSafetySandbox) throws {
        try PlantedThing.symbolicLinkToMissingName.plant(
            at: sandbox.folder.appendingPathComponent(StoreLocation.lockFileName), as: .lockFile, in: sandbox)
        try PlantedThing.symbolicLinkToEmptyFile.plant(
            at: sandbox.folder.appendingPathComponent(StoreLocation.dataFileName), as: .dataFile, in: sandbox)
    }

    /// Checks that the store refuses everything with `unsafeFile` saying `message`, and that
    /// ``TinyStorage/inspect(storeDirectory:)`` (what `tinystorage verify` uses) does too.
    func expectRefused(
        _ sandbox: FileSafetySandbox, saying message: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        try sandbox.expectRefusal(saying: message, sourceLocation: sourceLocation)
        let inspection = expectError(.unsafeFile, sourceLocation: sourceLocation) {
            try TinyStorage.inspect(storeDirectory: sandbox.folder)
        }
        #expect(inspection?.message.contains(message) == true, sourceLocation: sourceLocation)
    }

    @Test(arguments: [0o777, 0o770, 0o707, 0o730, 0o703] as [mode_t])
    func aStoreFolderOthersMayWriteToWithoutTheStickyBitIsRefusedAndLeftAlone(mode: mode_t) throws {
        try withFileSafetySandbox { sandbox throws in
            try StoreScenario.existingStore.prepare(sandbox)
            try plantTheIssuesLinks(in: sandbox)
            try sandbox.setFolderMode(mode)
            let before = try FileTreeSnapshot(sandbox.root)

            try expectRefused(
                sandbox,
                saying: "'\(sandbox.folder.path)' can be written by other users (mode \(String(mode, radix: 8))), "
                    + "who could replace or remove the store's files. Make it private (chmod go-w) or set the sticky bit"
            )
            #expect(try FileTreeSnapshot(sandbox.root) == before)
            #expect((try? fileInfo(sandbox.missingName)) == nil, "the link's target was not created")
        }
    }

    @Test(
        .enabled(if: OtherUser.canGiveAway, "needs root, to give the store folder to nobody"),
        arguments: [0o700, 0o1777] as [mode_t])
    func aStoreFolderOwnedByAnotherUserIsRefusedAndLeftAlone(mode: mode_t) throws {
        try withFileSafetySandbox { sandbox throws in
            try StoreScenario.existingStore.prepare(sandbox)
            try plantTheIssuesLinks(in: sandbox)
            try sandbox.setFolderMode(mode)
            try OtherUser.giveAway(sandbox.folder)
            let before = try FileTreeSnapshot(sandbox.root)

            try sandbox.expectRefusal(
                saying: "'\(sandbox.folder.path)' is owned by user \(OtherUser.id ?? 0), not by this process's user "
                    + "(\(geteuid())). Run as that user, or give the directory to this one")
            // Read-only (as `tinystorage read` inspects), another user's folder may be looked in,
            // but the links planted in it are still refused (and a file of this process's user
            // would be too: not its owner's; see ReadOnlyAccessTests).
            expectError(.unsafeFile) { try TinyStorage.inspect(storeDirectory: sandbox.folder) }
            #expect(try FileTreeSnapshot(sandbox.root) == before)
        }
    }

    /// A link, a file, a FIFO, a socket or another user's directory where the store folder
    /// belongs: refused, and nothing is created through it (a store folder that does not exist is
    /// created, but `mkdir` never follows a link). A directory of this user is a store folder.
    @Test(arguments: PlantedThing.anyUsers)
    func whatIsPlantedAtTheStoreFolderNameIsRefusedUnlessItIsADirectoryOfThisUser(thing: PlantedThing) throws {
        try expectPlantedStoreFolder(thing)
    }

    @Test(OtherUser.isNeeded, arguments: PlantedThing.otherUsers)
    func whatAnotherUserPlantedAtTheStoreFolderNameIsRefused(thing: PlantedThing) throws {
        try expectPlantedStoreFolder(thing)
    }

    func expectPlantedStoreFolder(_ thing: PlantedThing) throws {
        try withFileSafetySandbox { sandbox throws in
            try thing.plant(at: sandbox.folder, as: .dataFile, in: sandbox)
            let before = try FileTreeSnapshot(sandbox.root)

            if thing == .otherUsersDirectory, let found = thing.foundInsteadOfDirectory {
                // Refused for writing; read-only, another user's directory is looked in, and
                // holds no store.
                try sandbox.expectRefusal(saying: "'\(sandbox.folder.path)' \(found)")
                do {
                    _ = try TinyStorage.inspect(storeDirectory: sandbox.folder)
                    Issue.record("a store was inspected where there is none")
                } catch let error as TinyStorageError {
                    #expect(error.code == .io && "\(error)".contains("No such file"), "\(error)")
                }
                #expect(try FileTreeSnapshot(sandbox.root) == before)
            } else if let found = thing.foundInsteadOfDirectory {
                try expectRefused(sandbox, saying: "'\(sandbox.folder.path)' \(found)")
                #expect(try FileTreeSnapshot(sandbox.root) == before)
            } else {
                let storage = sandbox.openStore()
                try storage.storeOrThrow(1, forKey: "streak")
                #expect(
                    try sandbox.outsideSnapshot().entries == before.entries.filter { !$0.key.hasPrefix("stores/store") }
                )
                #expect(
                    FileManager.default.fileExists(atPath: sandbox.folder.appendingPathComponent("planted.txt").path))
            }
        }
    }

    @Test func theFolderHoldingTheStoreFolderMayBeReachedThroughLinks() throws {
        try withFileSafetySandbox { sandbox throws in
            // Like an App Group container path whose components are links the system set up.
            let container = sandbox.root.appendingPathComponent("container", isDirectory: true)
            try FileManager.default.createSymbolicLink(at: container, withDestinationURL: sandbox.stores)
            let storage = TinyStorage(insideDirectory: container, name: "store", logger: TestLogger())
            try storage.storeOrThrow(364, forKey: "streak")
            #expect(try fileInfo(sandbox.folder.appendingPathComponent(StoreLocation.dataFileName)).st_size > 0)
            #expect(try sandbox.openStore().retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
        }
    }

    /// The quarantine folder, made only when damage is found, follows the same rule as the store
    /// folder: with others able to write to it, damage is not set aside there, and the damaged
    /// file is kept as it is.
    @Test(arguments: [(0o777, true), (0o730, true), (0o1777, false), (0o755, false)] as [(mode_t, Bool)])
    func aQuarantineFolderOthersMayWriteToIsRefusedUnlessSticky(mode: mode_t, isRefused: Bool) throws {
        try withFileSafetySandbox { sandbox throws in
            try StoreScenario.damagedStore.prepare(sandbox)
            let quarantine = sandbox.folder.appendingPathComponent(StoreLocation.quarantineDirectoryName)
            try FileManager.default.createDirectory(at: quarantine, withIntermediateDirectories: false)
            try setMode(quarantine, mode)
            let dataFile = sandbox.folder.appendingPathComponent(StoreLocation.dataFileName)
            let damaged = try Data(contentsOf: dataFile)

            let storage = sandbox.openStore()
            if isRefused {
                let reason = try #require(unavailabilityError(storage))
                #expect(reason.code == .unsafeFile, "\(reason)")
                #expect(
                    reason.message.contains(
                        "'\(quarantine.path)' can be written by other users (mode \(String(mode, radix: 8)))"),
                    "\(reason)")
                #expect(try Data(contentsOf: dataFile) == damaged)
                #expect(try FileManager.default.contentsOfDirectory(atPath: quarantine.path).isEmpty)
            } else {
                #expect(storage.availability.isAvailable)
                #expect(storage.recoveryReports.count == 1)
                #expect(try FileManager.default.contentsOfDirectory(atPath: quarantine.path).count == 1)
            }
        }
    }
}
