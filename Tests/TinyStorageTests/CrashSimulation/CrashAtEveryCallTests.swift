import Foundation
import Testing

@testable import TinyStorage

/// Write paths crashed at every call that changes the disk, each crash followed by the disks a
/// power loss could leave (every crash style, and scrambled ones from fixed seeds), then a reopen:
/// adopting a 2.x plist, salvaging a damaged file, compacting, migrating `UserDefaults`, and
/// creating a store.
@Suite struct CrashAtEveryCallTests {
    /// The post-crash disks tried at each crash point: every style, and more scrambled ones.
    static let crashes: [(seed: UInt64, style: SimulatedDisk.CrashStyle)] =
        SimulatedDisk.CrashStyle.allCases.map { (0, $0) } + (1...4).map { ($0, .scrambled) }

    /// Runs `action` on a disk from `makeDisk` once to count its calls, then again crashed before
    /// each of them and after the last, and hands `check` each post-crash disk with what `action`
    /// returned. Returns how many crash points were tried.
    @discardableResult
    static func crashAtEveryCall<Outcome>(
        makeDisk: () throws -> SimulatedDisk, action: (SimulatedDisk) -> Outcome,
        check: (_ after: SimulatedDisk, _ outcome: Outcome, _ context: String) throws -> Void
    ) throws -> Int {
        let dry = try makeDisk()
        let start = dry.changeCount
        _ = action(dry)
        let calls = dry.changeCount - start
        for index in 0...calls {
            let disk = try makeDisk()
            disk.armCrash(atChange: disk.changeCount + index)
            let outcome = action(disk)
            for crash in Self.crashes {
                let after = disk.crash(seed: crash.seed, style: crash.style)
                try check(after, outcome, "crash before call \(index) of \(calls), \(crash.style) \(crash.seed)")
            }
        }
        return calls + 1
    }

    // MARK: Adoption

    static let original: [String: Data] = [
        "streak": Data("364".utf8), "name": Data("\"Ada\"".utf8),
        "long": Data(("\"" + String(repeating: "x", count: 1500) + "\"").utf8),
    ]

    @Test(arguments: [TinyStorage.Durability.standard, .immediate])
    func adoptingA2xPlistSurvivesACrashAtEveryCall(durability: TinyStorage.Durability) throws {
        let plist = try PropertyListSerialization.data(fromPropertyList: Self.original, format: .binary, options: 0)
        let adopted = Self.original.mapValues { StoredValue($0, kind: .original) }
        let withCommit = adopted.merging(["after": StoredValue(Data("1".utf8), kind: .json)]) { $1 }
        try Self.crashAtEveryCall(
            makeDisk: {
                let disk = SimulatedStore.makeDisk()
                disk.makeSettledDirectories(atPath: SimulatedStore.directoryPath)
                disk.plantFile(atPath: SimulatedStore.plistPath, contents: Array(plist))
                return disk
            },
            action: { disk -> Bool in
                let store = SimulatedStore.open(on: disk, durability: durability)
                return (try? store.storeOrThrow(1, forKey: "after")) != nil
            },
            check: { after, acknowledged, context throws in
                let entries = try SimulatedStore.open(on: after, durability: durability).rawEntries()
                #expect(entries == adopted || entries == withCommit, "\(context): adopted whole, never empty")
                if acknowledged && durability == .immediate { #expect(entries == withCommit, "\(context)") }
                #expect(after.contents(atPath: SimulatedStore.plistPath) == Array(plist), "\(context): plist kept")
            })
    }

    // MARK: Salvage

    /// A data file whose middle record fails its checksum: five commits, the third damaged, all
    /// of them below the durable mark (so the damage is data loss, and salvage keeps the rest).
    static func damagedFile() -> [UInt8] {
        var bytes = LogHeader(generation: 1).encoded()
        for index in 0..<5 {
            let value = Data(("\"" + String(repeating: "s", count: 300 * index) + "\"").utf8)
            LogCommit(sequence: UInt64(index + 1), operations: [.put(key: "key\(index)", value: value)])
                .encode(into: &bytes)
            if index == 2 { bytes[bytes.count - 10] ^= 0xFF }
        }
        LogHeader.setDurableMark(bytes.count, in: &bytes)
        return bytes
    }

    @Test func salvagingADamagedFileSurvivesACrashAtEveryCall() throws {
        let damaged = Self.damagedFile()
        func makeDisk() -> SimulatedDisk {
            let disk = SimulatedStore.makeDisk()
            disk.makeSettledDirectories(atPath: SimulatedStore.directoryPath)
            disk.plantFile(atPath: SimulatedStore.dataPath, contents: damaged)
            return disk
        }
        let clean = SimulatedStore.open(on: makeDisk(), durability: .standard)
        #expect(throws: TinyStorageError.self, "the first throwing call reports the data loss") {
            try clean.rawEntries()
        }
        let salvaged = try clean.rawEntries()
        #expect(salvaged.count == 4 && clean.recoveryReports.map(\.isDataLoss) == [true])
        var seen: Set<String> = []
        let points = try Self.crashAtEveryCall(
            makeDisk: makeDisk,
            action: { disk in _ = try? SimulatedStore.open(on: disk, durability: .standard).rawEntries() },
            check: { after, _, context throws in
                let file = after.contents(atPath: SimulatedStore.dataPath) ?? []
                let store = SimulatedStore.open(on: after, durability: .standard)
                seen.insert(file == damaged ? "damaged file" : "rebuilt file")
                if file == damaged {
                    #expect(store.recoveryReports.contains { $0.isDataLoss }, "\(context): reported again")
                    let first = Result { () throws(TinyStorageError) in try store.rawEntries() }
                    #expect((try? first.get()) == nil, "\(context): the first throwing call reports it again")
                }
                #expect(try store.rawEntries() == salvaged, "\(context)")
                if file != damaged {
                    // The rebuilt file is in place: it is whole, and the damaged bytes were set aside first.
                    #expect(SimulatedStore.isCompleteDataFile(file), "\(context)")
                    let copies = (after.names(inDirectoryAtPath: SimulatedStore.quarantinePath) ?? []).filter {
                        $0.hasPrefix("damaged-file-")
                    }
                    #expect(
                        copies.map { after.contents(atPath: SimulatedStore.quarantinePath + "/" + $0) } == [damaged],
                        "\(context): the damaged file is in quarantine")
                }
            })
        #expect(points > 5)
        #expect(seen == ["damaged file", "rebuilt file"], "crashes before and after the rebuilt file took its place")
    }

    // MARK: Compaction

    @Test func compactingSurvivesACrashAtEveryCall() throws {
        var flushed: [String: StoredValue] = [:]
        var seen: Set<String> = []
        func makeDisk() throws -> SimulatedDisk {
            let disk = SimulatedStore.makeDisk()
            disk.makeSettledDirectories(atPath: SimulatedStore.directoryPath)
            let store = SimulatedStore.open(on: disk, durability: .standard)
            for index in 0..<30 {
                try store.storeOrThrow(String(repeating: "c", count: index * 20), forKey: "key\(index % 7)")
            }
            try store.synchronize()
            flushed = try store.rawEntries()
            return disk
        }
        try Self.crashAtEveryCall(
            makeDisk: makeDisk,
            action: { disk -> UInt64? in
                let inode = disk.status(atPath: SimulatedStore.dataPath)?.inode
                try? SimulatedStore.open(on: disk, durability: .standard).compactNow()
                return inode
            },
            check: { after, oldInode, context throws in
                let replaced = after.status(atPath: SimulatedStore.dataPath)?.inode != oldInode
                let file = after.contents(atPath: SimulatedStore.dataPath) ?? []
                #expect(try SimulatedStore.open(on: after, durability: .standard).rawEntries() == flushed, "\(context)")
                seen.insert(replaced ? "compacted file" : "old file")
                if replaced {
                    #expect(SimulatedStore.isCompleteDataFile(file), "\(context): the new file is whole")
                }
            })
        #expect(seen == ["old file", "compacted file"])
    }

    // MARK: Upgrading to format version 3

    /// The first value that expires rewrites a version 2 file as version 3 (a compaction), then
    /// appends it: after a crash at any call the store holds what it held, and the value too when
    /// the write went that far (always, with `.immediate`, once the call returned). The file on
    /// disk is either the old version 2 file or a whole version 3 one, never a mix.
    @Test(arguments: [TinyStorage.Durability.standard, .immediate])
    func upgradingToVersion3SurvivesACrashAtEveryCall(durability: TinyStorage.Durability) throws {
        let clock = ManualClock()
        var before: [String: StoredValue] = [:]
        func makeDisk() throws -> SimulatedDisk {
            let disk = SimulatedStore.makeDisk()
            disk.makeSettledDirectories(atPath: SimulatedStore.directoryPath)
            let store = SimulatedStore.open(on: disk, durability: durability, clock: clock)
            for index in 0..<12 { try store.storeOrThrow("value \(index)", forKey: "key\(index % 5)") }
            try store.synchronize()
            before = try store.rawEntries()
            return disk
        }
        let token = StoredValue(
            Data("\"secret\"".utf8), kind: .json, deadline: Deadline(after: .seconds(3600), from: clock.now))
        var seen: Set<String> = []
        try Self.crashAtEveryCall(
            makeDisk: makeDisk,
            action: { disk -> Bool in
                let store = SimulatedStore.open(on: disk, durability: durability, clock: clock)
                return (try? store.storeOrThrow("secret", forKey: "token", expiresAfter: .seconds(3600))) != nil
            },
            check: { after, acknowledged, context throws in
                let file = after.contents(atPath: SimulatedStore.dataPath) ?? []
                let version = file.count > 12 ? file.withUnsafeBytes { $0.loadLittleEndian(UInt32.self, at: 8) } : 0
                #expect(SimulatedStore.isCompleteDataFile(file), "\(context): a whole file of one version")
                let entries = try SimulatedStore.open(on: after, durability: durability, clock: clock).rawEntries()
                var withToken = before
                withToken["token"] = token
                #expect(entries == before || entries == withToken, "\(context)")
                if acknowledged && durability == .immediate { #expect(entries == withToken, "\(context)") }
                if version == 2 { #expect(entries == before, "\(context): a version 2 file holds no deadline") }
                seen.insert("version \(version)" + (entries == withToken ? " with the value" : ""))
            })
        #expect(seen.isSuperset(of: ["version 2", "version 3", "version 3 with the value"]), "\(seen)")
    }

    // MARK: Migrating UserDefaults

    /// `migrate(userDefaults:…)` is one commit: after a crash at any call the store holds either
    /// what it held before or everything migrated, and with `.immediate` a migration that
    /// returned its report is there.
    @Test(arguments: [TinyStorage.Durability.standard, .immediate])
    func migratingUserDefaultsSurvivesACrashAtEveryCall(durability: TinyStorage.Durability) throws {
        let suite = "CrashAtEveryCallTests-\(UUID().uuidString)"
        let defaults = try #require(UserDefaults(suiteName: suite))
        defer { defaults.removePersistentDomain(forName: suite) }
        defaults.set(364, forKey: "streak")
        defaults.set("Ada", forKey: "name")
        defaults.set(true, forKey: "onboarded")
        defaults.set(Data([0, 1, 2]), forKey: "avatar")

        var before: [String: StoredValue] = [:]
        var migrated: [String: StoredValue] = [:]
        func makeDisk() throws -> SimulatedDisk {
            let disk = SimulatedStore.makeDisk()
            disk.makeSettledDirectories(atPath: SimulatedStore.directoryPath)
            let store = SimulatedStore.open(on: disk, durability: durability)
            try store.storeOrThrow(1, forKey: "existing")
            try store.synchronize()
            before = try store.rawEntries()
            return disk
        }
        let migrate = { (store: TinyStorage) -> Bool in
            store.migrate(
                userDefaults: defaults, nonBoolKeys: ["streak", "name", "avatar"], boolKeys: ["onboarded"],
                overwriteTinyStorageIfConflict: false) != nil
        }
        let dry = try makeDisk()
        let dryStore = SimulatedStore.open(on: dry, durability: durability)
        #expect(migrate(dryStore))
        migrated = try dryStore.rawEntries()
        #expect(migrated.count == 5 && migrated["avatar"]?.bytes == Data([0, 1, 2]))

        var lost: [String] = []
        let points = try Self.crashAtEveryCall(
            makeDisk: makeDisk,
            action: { disk -> Bool in migrate(SimulatedStore.open(on: disk, durability: durability)) },
            check: { after, acknowledged, context throws in
                let entries = try SimulatedStore.open(on: after, durability: durability).rawEntries()
                #expect(entries == before || entries == migrated, "\(context): all or nothing")
                if acknowledged && durability == .immediate && entries != migrated { lost.append(context) }
            })
        #expect(lost.isEmpty, "acknowledged and lost: \(lost.joined(separator: "; "))")
        #expect(points >= 2, "the migration's commit was crashed at each of its calls")
    }

    // MARK: Creating a store

    /// A new store's folder is durable before its first commit is acknowledged: the directory it
    /// was created in is flushed (until that was done, a power loss could take the folder with
    /// every flushed commit in it; these tests found it).
    @Test func creatingAStoreAndCommittingDurablySurvivesACrashAtEveryCall() throws {
        var lost: [String] = []
        try Self.crashAtEveryCall(
            makeDisk: { SimulatedStore.makeDisk() },
            action: { disk -> Bool in
                (try? SimulatedStore.open(on: disk, durability: .immediate).storeOrThrow(1, forKey: "a")) != nil
            },
            check: { after, acknowledged, context throws in
                let entries = try SimulatedStore.open(on: after, durability: .immediate).rawEntries()
                #expect(entries == [:] || entries == ["a": StoredValue(Data("1".utf8), kind: .json)], "\(context)")
                if acknowledged && entries.isEmpty { lost.append(context) }
            })
        #expect(lost.isEmpty, "acknowledged and lost: \(lost.joined(separator: "; "))")
    }
}
