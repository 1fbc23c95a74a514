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

/// What someone who can write into a store folder (or who made the copy it was restored from)
/// puts at one of the store's names.
enum PlantedThing: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case symbolicLinkToFile
    case symbolicLinkToEmptyFile
    case symbolicLinkToMissingName
    case symbolicLinkToDirectory
    case hardLinkToOutsideFile
    case fifo
    case directory
    case socket
    case otherUsersFile
    case otherUsersDirectory

    var testDescription: String { rawValue }

    /// The kinds any user can plant.
    static let anyUsers: [PlantedThing] = allCases.filter { !otherUsers.contains($0) }

    /// The kinds that need root to plant (`chown` to `nobody`): tests of them are separate, and
    /// skipped with a reason when not root.
    static let otherUsers: [PlantedThing] = [.otherUsersFile, .otherUsersDirectory]

    /// Puts this thing at `url`, in place of what is there. Links point at the outside file the store would read in place of
    /// `name`: another store's data file, or an original TinyStorage file for `tiny-storage.plist`.
    func plant(at url: URL, as name: StoreName, in sandbox: FileSafetySandbox) throws {
        let foreign = name == .originalFile ? sandbox.foreignOriginalFile : sandbox.foreignDataFile
        let manager = FileManager.default
        if (try? fileInfo(url)) != nil { try manager.removeItem(at: url) }
        switch self {
        case .symbolicLinkToFile: try manager.createSymbolicLink(at: url, withDestinationURL: foreign)
        case .symbolicLinkToEmptyFile: try manager.createSymbolicLink(at: url, withDestinationURL: sandbox.emptyFile)
        case .symbolicLinkToMissingName:
            try manager.createSymbolicLink(at: url, withDestinationURL: sandbox.missingName)
        case .symbolicLinkToDirectory: try manager.createSymbolicLink(at: url, withDestinationURL: sandbox.directory)
        case .hardLinkToOutsideFile: try makeHardLink(at: url, to: foreign)
        case .fifo: try makeFIFO(at: url)
        case .directory, .otherUsersDirectory:
            try manager.createDirectory(at: url, withIntermediateDirectories: false)
            try setMode(url, 0o700)
            try Data("planted\n".utf8).write(to: url.appendingPathComponent("planted.txt"))
            if self == .otherUsersDirectory { try OtherUser.giveAway(url) }
        case .socket: try makeSocket(at: url, scratch: sandbox.root.appendingPathComponent("s"))
        case .otherUsersFile:
            try Data(contentsOf: foreign).write(to: url)
            try setMode(url, 0o600)
            try OtherUser.giveAway(url)
        }
    }

    /// What the refusal says is at a name where the store expects its own regular file.
    var foundInsteadOfFile: String {
        switch self {
        case .symbolicLinkToFile, .symbolicLinkToEmptyFile, .symbolicLinkToMissingName, .symbolicLinkToDirectory:
            "is a symbolic link"
        case .hardLinkToOutsideFile: "has 2 names (hard links)"
        case .fifo: "is a FIFO (named pipe)"
        case .directory, .otherUsersDirectory: "is a directory"
        case .socket: "is a socket"
        case .otherUsersFile: "is owned by user \(OtherUser.id ?? 0)"
        }
    }

    /// What the refusal says is at a name where the store expects its own directory; `nil` for a
    /// directory of this user, which is one.
    var foundInsteadOfDirectory: String? {
        switch self {
        case .symbolicLinkToFile, .symbolicLinkToEmptyFile, .symbolicLinkToMissingName, .symbolicLinkToDirectory:
            "is a symbolic link"
        case .hardLinkToOutsideFile, .otherUsersFile: "is a regular file"
        case .fifo: "is a FIFO (named pipe)"
        case .directory: nil
        case .socket: "is a socket"
        case .otherUsersDirectory: "is owned by user \(OtherUser.id ?? 0)"
        }
    }
}

/// The names a store uses in its folder (see `StoreLocation` and `StoreFolder`).
enum StoreName: String, CaseIterable, Sendable {
    /// `store.tinystorage`.
    case dataFile
    /// `store.lock`.
    case lockFile
    /// `tiny-storage.plist`, read only while adopting it.
    case originalFile
    /// `quarantine/`, used only when damage is found.
    case quarantineFolder
    /// `quarantine/damaged-file-<CRC-32C>-<size>.bin`: predictable by whoever knows the damage.
    case quarantineCopy
    /// `.store.tinystorage.<pid>-<16 random hex digits>.tmp` of a running process (this one): the
    /// store never creates that name again, and leaves what is there alone.
    case temporary
    /// The same name for a process that is gone: removed as an abandoned temporary file (the
    /// name only, never what it points to).
    case abandonedTemporary
    /// `quarantine/.damaged-file.<pid>-<16 random hex digits>.tmp` of this process, where a
    /// quarantine copy is written before it is renamed into place: left alone.
    case quarantineTemporary
    /// `store.tinystorage.compacting`, where earlier versions wrote compactions: no longer used.
    case formerCompactionFile

    var isInQuarantine: Bool { self == .quarantineCopy || self == .quarantineTemporary }

    /// The name relative to the store folder.
    func path(quarantineCopy: String) -> String {
        switch self {
        case .dataFile: StoreLocation.dataFileName
        case .lockFile: StoreLocation.lockFileName
        case .originalFile: StoreLocation.originalFileName
        case .quarantineFolder: StoreLocation.quarantineDirectoryName
        case .quarantineCopy: StoreLocation.quarantineDirectoryName + "/" + quarantineCopy
        case .temporary: ".\(StoreLocation.dataFileName).\(getpid())-0123456789abcdef\(StoreFolder.temporarySuffix)"
        case .abandonedTemporary:
            ".\(StoreLocation.dataFileName).\(Int32.max)-0123456789abcdef\(StoreFolder.temporarySuffix)"
        case .quarantineTemporary:
            StoreLocation.quarantineDirectoryName + "/.damaged-file.\(getpid())-0123456789abcdef"
                + StoreFolder.temporarySuffix
        case .formerCompactionFile: StoreLocation.dataFileName + ".compacting"
        }
    }
}

/// What is in the store folder before the store opens it.
enum StoreScenario: String, CaseIterable, Sendable {
    /// A store holding values: opened, read, written, compacted.
    case existingStore
    /// A store whose data file has a damaged record followed by good ones: opening salvages it
    /// (quarantine copy, rebuilt file), then it is read, written and compacted.
    case damagedStore
    /// Only an original TinyStorage file: opening adopts it into a new data file.
    case originalToAdopt

    /// Makes the store folder and what this scenario keeps in it.
    ///
    /// - Returns: the name the quarantine copy of the damaged file gets (any name elsewhere).
    @discardableResult
    func prepare(_ sandbox: FileSafetySandbox) throws -> String {
        switch self {
        case .existingStore:
            try fillStore(sandbox)
            return "damaged-file-00000000-0.bin"
        case .damagedStore:
            let (dataFile, damaged) = try fillStore(sandbox)
            var bytes = try Data(contentsOf: dataFile)
            bytes[damaged.lowerBound + damaged.count / 2] ^= 0x01
            try bytes.write(to: dataFile)
            let checksum = bytes.withUnsafeBytes { crc32c($0) }
            let hex = String(checksum, radix: 16)
            return "damaged-file-\(String(repeating: "0", count: 8 - hex.count) + hex)-\(bytes.count).bin"
        case .originalToAdopt:
            try FileManager.default.createDirectory(at: sandbox.folder, withIntermediateDirectories: false)
            try setMode(sandbox.folder, 0o700)
            let plist = ["streak": Data("364".utf8)]
            try PropertyListSerialization.data(fromPropertyList: plist, format: .binary, options: 0)
                .write(to: sandbox.folder.appendingPathComponent(StoreLocation.originalFileName))
            return "damaged-file-00000000-0.bin"
        }
    }

    /// Damage in a store's flushed part is data loss (issue 11): the first throwing read after
    /// opening the damaged store reports it, once; every other scenario reads normally.
    func expectDataLossReportedOnce(by storage: TinyStorage) {
        guard self == .damagedStore else { return }
        TinyStorageTests.expectDataLossReportedOnce(by: storage)
    }

    /// A store holding `streak = 364` and ten other keys, one commit each.
    /// - Returns: the data file and the byte range of the record of `filler4`.
    @discardableResult
    private func fillStore(_ sandbox: FileSafetySandbox) throws -> (URL, Range<Int>) {
        let storage = sandbox.openStore()
        try storage.storeOrThrow(364, forKey: "streak")
        var filler = 0..<0
        for index in 0..<10 {
            let start = try committedLength(storage.fileURL)
            try storage.storeOrThrow("filler \(index)", forKey: "filler\(index)")
            if index == 4 { filler = start..<(try committedLength(storage.fileURL)) }
        }
        try storage.synchronize()  // NB: flushed, so damage to it is data loss (see `makeStore`)
        return (storage.fileURL, filler)
    }
}

/// What is at a planted name, to tell whether the store changed it: its kind and identity, its
/// bytes for a file, and the file planted inside it for a directory.
struct PlantedState: Equatable {
    var kind: UInt32
    var device: UInt64
    var inode: UInt64
    var contents: Data?

    init(_ url: URL) throws {
        let info = try fileInfo(url)
        kind = UInt32(info.st_mode & S_IFMT)
        device = UInt64(truncatingIfNeeded: info.st_dev)
        inode = UInt64(truncatingIfNeeded: info.st_ino)
        switch info.st_mode & S_IFMT {
        case S_IFREG: contents = try Data(contentsOf: url)
        case S_IFDIR: contents = try Data(contentsOf: url.appendingPathComponent("planted.txt"))
        default: contents = nil
        }
    }

    /// `nil` when nothing is at `url`.
    static func at(_ url: URL) throws -> PlantedState? {
        var info = stat()
        if lstat(url.path, &info) != 0 && errno == ENOENT { return nil }
        return try PlantedState(url)
    }
}
