import Foundation
import Testing

@testable import TinyStorage

/// Issue 5, item 4: a folder of the original TinyStorage library (`tiny-storage.plist`, a binary
/// property list of `[String: Data]` whose values are JSON) is imported on the first open, in one
/// commit, and the plist is never changed; an unreadable or unparsable plist leaves the store
/// unavailable and creates no data file, so an empty store can never shadow the original values.
@Suite struct AdoptionTests {
    struct Settings: Codable, Sendable, Equatable {
        var theme: String
        var fontSize: Double
        var tags: [String]
    }

    /// Fifty values of mixed types, encoded as the original library did (`JSONEncoder()`).
    static func originalValues() throws -> (plist: [String: Data], check: [(String, (TinyStorage) throws -> Bool)]) {
        let date = Date(timeIntervalSinceReferenceDate: 700_000_000.25)
        let settings = Settings(theme: "dark", fontSize: 13.5, tags: ["a", "ü", "\"q\""])
        var plist: [String: Data] = [:]
        var check: [(String, (TinyStorage) throws -> Bool)] = []
        func add<T: Codable & Sendable & Equatable>(_ key: String, _ value: T) throws {
            plist[key] = try JSONEncoder().encode(value)
            check.append((key, { try $0.retrieveOrThrow(type: T.self, forKey: key) == value }))
        }
        for index in 0..<7 {
            try add("int\(index)", index * 1_000 - 3_000)
            try add("string\(index)", "value \(index) ✓ \"quoted\"")
            try add("bool\(index)", index % 2 == 0)
            try add("double\(index)", Double(index) / 3)
            try add("date\(index)", date.addingTimeInterval(Double(index)))
            try add("ints\(index)", Array(0..<index))
            try add("settings\(index)", settings)
        }
        try add("data", Data([0, 1, 2, 255]))
        #expect(plist.count == 50)
        return (plist, check)
    }

    /// Creates `parent/store/` holding only the original library's file.
    @discardableResult
    func writeOriginal(_ plist: Any, in parent: URL) throws -> (folder: URL, bytes: Data) {
        let folder = parent.appendingPathComponent("store", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let bytes = try PropertyListSerialization.data(fromPropertyList: plist, format: .binary, options: 0)
        try bytes.write(to: folder.appendingPathComponent("tiny-storage.plist"))
        return (folder, bytes)
    }

    @Test func theFirstOpenImportsEveryValueInOneCommitAndKeepsThePlist() throws {
        try withTemporaryDirectory { parent throws in
            let (plist, check) = try Self.originalValues()
            let (folder, bytes) = try writeOriginal(plist, in: parent)

            let storage = openStore(parent)
            #expect(storage.availability.isAvailable)
            #expect(try storage.rawJSON() == plist, "values are imported byte for byte")
            for (key, matches) in check { #expect(try matches(storage), "\(key)") }
            #expect(try Data(contentsOf: folder.appendingPathComponent("tiny-storage.plist")) == bytes)
            // One commit: the header and a single record.
            let inspection = try TinyStorage.inspect(storeDirectory: folder)
            #expect(inspection.recordCount == 1)
            #expect(inspection.isHealthy)
            #expect(try permissions(storage.fileURL) == 0o600)
            #expect(storage.recoveryReports.isEmpty)
        }
    }

    @Test func reopeningNeverImportsAgain() throws {
        try withTemporaryDirectory { parent throws in
            let (plist, _) = try Self.originalValues()
            let (folder, _) = try writeOriginal(plist, in: parent)
            do {
                let storage = openStore(parent)
                try storage.storeOrThrow(365, forKey: "int0")
                try storage.storeOrThrow(nil, forKey: "string0")
            }
            // Even a plist that changed since (the original library still running somewhere) is
            // not imported again: our file is the truth once it exists.
            var changed = plist
            changed["added later"] = Data("1".utf8)
            try writeOriginal(changed, in: parent)

            let reopened = openStore(parent)
            #expect(try reopened.retrieveOrThrow(type: Int.self, forKey: "int0") == 365)
            #expect(try reopened.retrieveOrThrow(type: String.self, forKey: "string0") == nil)
            #expect(!reopened.contains("added later"))
            #expect(try reopened.rawJSON().count == 49)
            #expect(try TinyStorage.inspect(storeDirectory: folder).recordCount == 3)
        }
    }

    @Test(arguments: [
        (Errno.accessDenied, TinyStorageError.Code.permissionDenied), (.notPermitted, .permissionDenied),
        (.ioError, .io),
    ])
    func anUnreadablePlistLeavesTheStoreUnavailableAndCreatesNoDataFile(
        error: Errno, code: TinyStorageError.Code
    ) throws {
        try withTemporaryDirectory { parent throws in
            let (plist, _) = try Self.originalValues()
            let (folder, bytes) = try writeOriginal(plist, in: parent)
            let faults = FaultSwitch()
            faults.inject { call, path in
                call == .open && path?.hasSuffix("/tiny-storage.plist") == true ? .fail(error) : nil
            }

            let storage = openStore(parent, io: faults.io)
            #expect(unavailabilityError(storage)?.code == code)
            expectError(.unavailable) { try storage.retrieveOrThrow(type: Int.self, forKey: "int1") }
            expectError(.unavailable) { try storage.storeOrThrow(1, forKey: "int1") }
            storage.store(1, forKey: "int1")
            #expect(!FileManager.default.fileExists(atPath: storage.fileURL.path), "a data file would shadow the plist")
            #expect(try Data(contentsOf: folder.appendingPathComponent("tiny-storage.plist")) == bytes)

            // Readable again: the same instance adopts it on its next access.
            faults.clear()
            #expect(try storage.rawJSON() == plist)
        }
    }

    @Test(arguments: [
        ("not a property list", Data("not a plist".utf8)),
        ("a truncated binary plist", Data("bplist00".utf8) + Data([0xD1, 0x01, 0x02])),
        ("an array", try PropertyListSerialization.data(fromPropertyList: ["a"], format: .binary, options: 0)),
        (
            "a dictionary of numbers",
            try PropertyListSerialization.data(fromPropertyList: ["streak": 364], format: .binary, options: 0)
        ),
    ])
    func anUnparsablePlistIsCorruptedAndLeftUntouched(description: String, bytes: Data) throws {
        try withTemporaryDirectory { parent throws in
            let folder = parent.appendingPathComponent("store", isDirectory: true)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let original = folder.appendingPathComponent("tiny-storage.plist")
            try bytes.write(to: original)

            let storage = openStore(parent)
            #expect(unavailabilityError(storage)?.code == .corrupted, "\(description)")
            expectError(.unavailable) { try storage.storeOrThrow(1, forKey: "streak") }
            storage.reset()
            #expect(!FileManager.default.fileExists(atPath: storage.fileURL.path), "\(description)")
            #expect(try Data(contentsOf: original) == bytes, "\(description)")
        }
    }

    @Test func anEmptyPlistStartsAnEmptyStoreAndIsKept() throws {
        try withTemporaryDirectory { parent throws in
            let (folder, bytes) = try writeOriginal([String: Data](), in: parent)
            let storage = openStore(parent)
            #expect(storage.availability.isAvailable)
            #expect(try storage.rawJSON().isEmpty)
            #expect(try Data(contentsOf: folder.appendingPathComponent("tiny-storage.plist")) == bytes)
        }
    }

    /// The first open creates the data file, then writes the header and the imported values into
    /// it. When that write fails (a full disk) the empty file stays behind; when the disk has room
    /// again, the original values must still be imported, never shadowed by an empty store.
    @Test func aFailedFirstWriteDoesNotLoseTheOriginalValues() throws {
        try withTemporaryDirectory { parent throws in
            let (plist, _) = try Self.originalValues()
            try writeOriginal(plist, in: parent)
            let faults = FaultSwitch()
            faults.inject(.fail(.noSpace), into: .write)

            let storage = openStore(parent, io: faults.io)
            #expect(unavailabilityError(storage)?.code == .noSpace)
            faults.clear()
            #expect(try storage.rawJSON().count == plist.count, "the store came back without the plist's values")
            #expect(try storage.rawJSON() == plist)
            #expect(try openStore(parent).retrieveOrThrow(type: Int.self, forKey: "int4") == 1_000)
        }
    }

    /// The same, after a crash between creating the data file and writing it: an empty data file
    /// beside the plist.
    @Test func anEmptyDataFileBesideThePlistDoesNotHideTheOriginalValues() throws {
        try withTemporaryDirectory { parent throws in
            let (plist, _) = try Self.originalValues()
            let (folder, _) = try writeOriginal(plist, in: parent)
            try Data().write(to: folder.appendingPathComponent("store.tinystorage"))

            let storage = openStore(parent)
            #expect(try storage.rawJSON().count == plist.count, "the store came back without the plist's values")
            #expect(try storage.rawJSON() == plist)
        }
    }
}
