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

/// Issue 14 through the file layer's seam: a name swapped for something else at the worst moment,
/// between the call that inspects it and the call that uses it. The seam's hook runs just before
/// the named call, and swaps the name there; the real call then runs on what was swapped in.
///
/// An open after an inspection fails on a link (`O_NOFOLLOW`), or finds another file than the
/// one inspected (`fstat(2)` after `openat(2)`); a rename replaces what is at its destination
/// without following it. Either way nothing outside the store folder is created, changed or read.
@Suite struct SwappedBetweenCallsTests {
    enum Swap: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case dataFileForALinkBeforeItsOpen
        case dataFileForAHardLinkBeforeItsOpen
        case dataFileForAFIFOBeforeItsOpen
        case lockFileForALinkBeforeItsOpen
        case missingLockFileForALinkBeforeItIsCreated
        case originalFileForALinkBeforeItsOpen
        case storeFolderForALinkBeforeItsOpen
        case storeFolderForAnotherDirectoryBeforeItsOpen
        case quarantineFolderForALinkBeforeItsOpen
        case newDataFileForALinkBeforeItIsRenamedIntoPlace
        case dataFileForALinkBeforeACompactionReplacesIt
        case damagedDataFileForALinkBeforeItsRebuiltFileReplacesIt

        var testDescription: String { rawValue }

        var scenario: StoreScenario {
            switch self {
            case .originalFileForALinkBeforeItsOpen, .newDataFileForALinkBeforeItIsRenamedIntoPlace: .originalToAdopt
            case .quarantineFolderForALinkBeforeItsOpen, .damagedDataFileForALinkBeforeItsRebuiltFileReplacesIt:
                .damagedStore
            default: .existingStore
            }
        }

        /// The call before which the name is swapped, and that name relative to the store folder
        /// (`nil`: the store folder itself).
        var moment: (call: FileIO.Call, name: String?) {
            switch self {
            case .dataFileForALinkBeforeItsOpen, .dataFileForAHardLinkBeforeItsOpen, .dataFileForAFIFOBeforeItsOpen:
                (.open, StoreLocation.dataFileName)
            case .lockFileForALinkBeforeItsOpen, .missingLockFileForALinkBeforeItIsCreated:
                (.open, StoreLocation.lockFileName)
            case .originalFileForALinkBeforeItsOpen: (.open, StoreLocation.originalFileName)
            case .storeFolderForALinkBeforeItsOpen, .storeFolderForAnotherDirectoryBeforeItsOpen: (.open, nil)
            case .quarantineFolderForALinkBeforeItsOpen: (.open, StoreLocation.quarantineDirectoryName)
            case .newDataFileForALinkBeforeItIsRenamedIntoPlace, .dataFileForALinkBeforeACompactionReplacesIt,
                .damagedDataFileForALinkBeforeItsRebuiltFileReplacesIt:
                (.rename, StoreLocation.dataFileName)
            }
        }

        /// What the refusal says, or `nil` when the store works (a rename replaced the link).
        var refusal: String? {
            switch self {
            case .dataFileForALinkBeforeItsOpen, .lockFileForALinkBeforeItsOpen, .originalFileForALinkBeforeItsOpen:
                "was replaced by something that is not a regular file while it was being opened"
            // NB: a file replaced between the look and the open is looked at again, so the
            // refusal names what was swapped in.
            case .dataFileForAHardLinkBeforeItsOpen: PlantedThing.hardLinkToOutsideFile.foundInsteadOfFile
            case .dataFileForAFIFOBeforeItsOpen: PlantedThing.fifo.foundInsteadOfFile
            case .missingLockFileForALinkBeforeItIsCreated, .newDataFileForALinkBeforeItIsRenamedIntoPlace:
                "is a symbolic link"
            case .storeFolderForALinkBeforeItsOpen, .quarantineFolderForALinkBeforeItsOpen:
                "was replaced by something that is not a directory while it was being opened"
            case .storeFolderForAnotherDirectoryBeforeItsOpen:
                "was replaced by another directory while it was being opened"
            case .dataFileForALinkBeforeACompactionReplacesIt, .damagedDataFileForALinkBeforeItsRebuiltFileReplacesIt:
                nil
            }
        }

        /// Puts the swapped-in thing at `url`, after moving what is there into `aside`.
        func swap(_ url: URL, in sandbox: FileSafetySandbox, aside: URL) throws {
            let manager = FileManager.default
            if (try? fileInfo(url)) != nil { try manager.moveItem(at: url, to: aside.appendingPathComponent("moved")) }
            switch self {
            case .dataFileForAHardLinkBeforeItsOpen: try makeHardLink(at: url, to: sandbox.foreignDataFile)
            case .dataFileForAFIFOBeforeItsOpen: try makeFIFO(at: url)
            case .lockFileForALinkBeforeItsOpen, .missingLockFileForALinkBeforeItIsCreated:
                try manager.createSymbolicLink(at: url, withDestinationURL: sandbox.missingName)
            case .originalFileForALinkBeforeItsOpen:
                try manager.createSymbolicLink(at: url, withDestinationURL: sandbox.foreignOriginalFile)
            case .storeFolderForALinkBeforeItsOpen, .quarantineFolderForALinkBeforeItsOpen:
                try manager.createSymbolicLink(at: url, withDestinationURL: sandbox.directory)
            case .storeFolderForAnotherDirectoryBeforeItsOpen:
                try manager.createDirectory(at: url, withIntermediateDirectories: false)
                try setMode(url, 0o700)
            default: try manager.createSymbolicLink(at: url, withDestinationURL: sandbox.foreignDataFile)
            }
        }
    }

    /// A `FileIO` whose hook runs `action` once, the first time `call` is about to run on `path`,
    /// and sets `done` then.
    func swapping(
        before call: FileIO.Call, on path: String, done: Locked<Bool>,
        _ action: @escaping @Sendable () throws -> Void
    ) -> FileIO {
        FileIO { candidate, candidatePath in
            guard candidate == call, candidatePath == path else { return nil }
            let isFirst = done.withLock { done in
                defer { done = true }
                return !done
            }
            guard isFirst else { return nil }
            do { try action() } catch { Issue.record(error, "the swap failed") }
            return nil
        }
    }

    @Test(arguments: Swap.allCases)
    func nothingOutsideIsTouchedWhenANameIsSwappedBetweenTwoCalls(swap: Swap) throws {
        try withFileSafetySandbox { sandbox throws in
            try swap.scenario.prepare(sandbox)
            if swap == .missingLockFileForALinkBeforeItIsCreated {
                try FileManager.default.removeItem(
                    at: sandbox.folder.appendingPathComponent(StoreLocation.lockFileName))
            }
            let (call, name) = swap.moment
            let url = name.map { sandbox.folder.appendingPathComponent($0) } ?? sandbox.folder
            // NB: what the swap moves away goes to `aside`, which is not part of what must not change.
            let aside = sandbox.root.appendingPathComponent("aside", isDirectory: true)
            try FileManager.default.createDirectory(at: aside, withIntermediateDirectories: false)
            let swapped = Locked(false)
            let io = swapping(before: call, on: url.path, done: swapped) {
                try swap.swap(url, in: sandbox, aside: aside)
            }
            // NB: the swap itself changes `stores/` when it moves the store folder.
            let outside = try FileTreeSnapshot(sandbox.root, excluding: ["stores", "aside"])

            let logger = TestLogger()
            let storage = openStore(sandbox.stores, io: io, logger: logger)
            if let refusal = swap.refusal {
                // The open that met the swap says so; later looks find what was swapped in.
                let logged = logger.texts(atLeast: .error)
                // NB: the unavailable store's message says why; its cause is named by its code.
                #expect(
                    logged.contains { $0.contains("'\(url.path)' \(refusal)") && $0.contains("(cause: unsafeFile") },
                    "\(logged)")
                if swap != .storeFolderForAnotherDirectoryBeforeItsOpen {
                    let reason = try #require(unavailabilityError(storage))
                    #expect(reason.code == .unsafeFile, "\(reason)")
                    #expect(reason.message.contains("'\(url.path)' "), "\(reason)")
                    expectError(.unavailable) { try storage.storeOrThrow(365, forKey: "streak") }
                }
            } else {
                swap.scenario.expectDataLossReportedOnce(by: storage)
                #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
                if swap == .dataFileForALinkBeforeACompactionReplacesIt { try storage.compactNow() }
                try storage.storeOrThrow(365, forKey: "streak")
                let reopened = sandbox.openStore()
                #expect(try reopened.retrieveOrThrow(type: Int.self, forKey: "streak") == 365)
                #expect(try reopened.rawEntries()[FileSafetySandbox.foreignKey] == nil)
                #expect(try fileInfo(url).st_mode & S_IFMT == S_IFREG, "the rename replaced the link")
            }
            #expect(swapped.withLock { $0 }, "the engine never made the call the swap was to precede")
            let after = try FileTreeSnapshot(sandbox.root, excluding: ["stores", "aside"])
            #expect(after == outside, "before:\n\(outside)\nafter:\n\(after)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: sandbox.stores.path) == ["store"])
        }
    }
}
