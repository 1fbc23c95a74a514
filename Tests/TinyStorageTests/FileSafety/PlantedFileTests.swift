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

/// Issue 14's acceptance matrix: for every name the store uses, each thing someone could plant
/// there, and each way a store is opened (an existing store, a damaged one, an original
/// TinyStorage file to adopt), in a private folder (a copied or restored store) and in a folder
/// everyone may write to with the sticky bit.
///
/// Whatever was planted, after open, read, write and compaction (and the recovery or adoption
/// that opening does): every file outside the store folder has the same bytes, permissions, owner
/// and modification time, and no name appeared there. Where the store must use the planted name,
/// it is unavailable with `unsafeFile`, the message names the path and what is there, and the
/// store folder is as it was. Where it need not, it works, never reads the planted thing, and
/// leaves it where it is.
@Suite struct PlantedFileTests {
    /// The store folder's permissions.
    enum FolderMode: mode_t, CaseIterable, Sendable, CustomTestStringConvertible {
        /// Private, as a store is created: what was planted came with a copy or a restore.
        case privateFolder = 0o700
        /// Everyone may write, with the sticky bit, so no one removes or renames another's files.
        case stickyFolderEveryoneMayWrite = 0o1777

        var testDescription: String { "mode \(String(rawValue, radix: 8))" }
    }

    struct Planted: Sendable, CustomTestStringConvertible {
        var thing: PlantedThing
        var name: StoreName
        var scenario: StoreScenario

        var testDescription: String { "\(thing) at \(name), \(scenario)" }

        /// Each of `things` at every name, in every scenario. A quarantine copy is only made of
        /// a damaged store, so names in the quarantine folder are planted only there.
        static func all(_ things: [PlantedThing]) -> [Planted] {
            StoreScenario.allCases.flatMap { scenario in
                StoreName.allCases.filter { !$0.isInQuarantine || scenario == .damagedStore }.flatMap { name in
                    things.map { Planted(thing: $0, name: name, scenario: scenario) }
                }
            }
        }

        /// What the refusal says is at the name, or `nil` when the store does not need the name
        /// in this scenario, or the thing is what it expects there.
        var refusal: String? {
            switch name {
            case .dataFile, .lockFile, .quarantineCopy: thing.foundInsteadOfFile
            case .originalFile: scenario == .originalToAdopt ? thing.foundInsteadOfFile : nil
            case .quarantineFolder: scenario == .damagedStore ? thing.foundInsteadOfDirectory : nil
            case .temporary, .abandonedTemporary, .quarantineTemporary, .formerCompactionFile: nil
            }
        }

        /// Whether the store removes the planted name (never what it points to): an abandoned
        /// temporary file, unless it is a directory.
        var isRemoved: Bool {
            name == .abandonedTemporary && thing != .directory && thing != .otherUsersDirectory
        }
    }

    @Test(arguments: FolderMode.allCases, Planted.all(PlantedThing.anyUsers))
    func nothingOutsideTheStoreFolderIsCreatedChangedOrRead(mode: FolderMode, planted: Planted) throws {
        try expectNothingOutsideTouched(mode: mode, planted: planted)
    }

    @Test(OtherUser.isNeeded, arguments: FolderMode.allCases, Planted.all(PlantedThing.otherUsers))
    func nothingOutsideTheStoreFolderIsCreatedChangedOrReadWhenAnotherUserPlantedIt(
        mode: FolderMode, planted: Planted
    ) throws {
        try expectNothingOutsideTouched(mode: mode, planted: planted)
    }

    func expectNothingOutsideTouched(mode: FolderMode, planted: Planted) throws {
        try withFileSafetySandbox { sandbox throws in
            let quarantineCopy = try planted.scenario.prepare(sandbox)
            let url = sandbox.folder.appendingPathComponent(planted.name.path(quarantineCopy: quarantineCopy))
            if planted.name.isInQuarantine {
                try FileManager.default.createDirectory(
                    at: url.deletingLastPathComponent(), withIntermediateDirectories: false)
                try setMode(url.deletingLastPathComponent(), 0o700)
            }
            try planted.thing.plant(at: url, as: planted.name, in: sandbox)
            try sandbox.setFolderMode(mode.rawValue)
            let outside = try sandbox.outsideSnapshot()
            let plantedThing = try PlantedState(url)
            // NB: the lock file's bytes are a page shared between processes, not data.
            let folder = try FileTreeSnapshot(sandbox.folder, excluding: [StoreLocation.lockFileName])

            if let refusal = planted.refusal {
                try sandbox.expectRefusal(saying: "'\(url.path)' \(refusal)")
                #expect(try FileTreeSnapshot(sandbox.folder, excluding: [StoreLocation.lockFileName]) == folder)
            } else {
                try expectWorking(sandbox, planted.scenario)
            }
            #expect(try PlantedState.at(url) == (planted.isRemoved ? nil : plantedThing))
            let after = try sandbox.outsideSnapshot()
            #expect(after == outside, "before:\n\(outside)\nafter:\n\(after)")
            sandbox.expectNothingOutsideRead()
        }
    }

    /// `tinystorage verify` and `info` look at a store through ``TinyStorage/inspect(storeDirectory:)``,
    /// which creates nothing and follows the same rules.
    @Test(arguments: PlantedThing.anyUsers)
    func inspectingAStoreRefusesWhatIsPlantedAtItsDataFile(thing: PlantedThing) throws {
        try expectInspectionRefuses(thing)
    }

    @Test(OtherUser.isNeeded, arguments: PlantedThing.otherUsers)
    func inspectingAStoreRefusesWhatAnotherUserPlantedAtItsDataFile(thing: PlantedThing) throws {
        try expectInspectionRefuses(thing)
    }

    func expectInspectionRefuses(_ thing: PlantedThing) throws {
        try withFileSafetySandbox { sandbox throws in
            try StoreScenario.existingStore.prepare(sandbox)
            let url = sandbox.folder.appendingPathComponent(StoreLocation.dataFileName)
            try thing.plant(at: url, as: .dataFile, in: sandbox)
            let before = try FileTreeSnapshot(sandbox.root, excluding: ["stores/store/store.lock"])

            let error = expectError(.unsafeFile) { try TinyStorage.inspect(storeDirectory: sandbox.folder) }
            #expect(
                error?.message.contains("'\(url.path)' \(thing.foundInsteadOfFile)") == true,
                "\(String(describing: error))")
            #expect(try FileTreeSnapshot(sandbox.root, excluding: ["stores/store/store.lock"]) == before)
        }
    }

    /// Opens the store, reads, writes, compacts and reopens it, checking each step; it never
    /// shows a key it could only have read from a file outside its folder.
    func expectWorking(_ sandbox: FileSafetySandbox, _ scenario: StoreScenario) throws {
        let storage = sandbox.openStore()
        try #require(storage.availability.isAvailable, "\(String(describing: unavailabilityError(storage)))")
        scenario.expectDataLossReportedOnce(by: storage)
        #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
        if scenario == .damagedStore {
            let report = try #require(storage.recoveryReports.first)
            #expect(storage.recoveryReports.count == 1)
            #expect(report.quarantineURL.path.hasPrefix(sandbox.folder.path + "/quarantine/"))
            #expect(try storage.retrieveOrThrow(type: String.self, forKey: "filler9") == "filler 9")
        }
        try storage.storeOrThrow(365, forKey: "streak")
        try storage.compactNow()
        try storage.storeOrThrow(366, forKey: "streak")

        let reopened = sandbox.openStore()
        #expect(try reopened.retrieveOrThrow(type: Int.self, forKey: "streak") == 366)
        #expect(reopened.recoveryReports.isEmpty)
        #expect(try reopened.rawEntries()[FileSafetySandbox.foreignKey] == nil)
    }
}
