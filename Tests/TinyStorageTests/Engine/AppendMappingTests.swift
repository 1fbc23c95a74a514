import Foundation
import Testing

@testable import TinyStorage

/// Where commits copy their records into a mapping of the data file and where they write them
/// with `pwrite` (issue 12): only where a full disk cannot turn a write into `SIGBUS`.
@Suite struct AppendMappingTests {
    @Test(arguments: [
        (AppendMapping.ext4, true), (AppendMapping.xfs, true), (AppendMapping.tmpfs, true),
        (OtherFileSystem.btrfs, false), (OtherFileSystem.zfs, false), (OtherFileSystem.nfs, false),
    ])
    func onlyFileSystemsThatWriteAllocatedSpaceInPlaceAreMapped(type: Int64, mapped: Bool) throws {
        try withTemporaryDirectory { directory throws in
            let fd = open(directory.path, O_RDONLY)
            defer { close(fd) }
            let io = FileIO(fileSystem: RecordingFileSystem(fileSystemType: type))
            #expect(AppendMapping.isSafe(for: fd, io: io) == mapped)
        }
    }

    /// A file system whose type cannot be read is not trusted either.
    @Test func aFileSystemThatCannotBeAskedIsNotMapped() {
        #expect(!AppendMapping.isSafe(for: -1, io: .system))
    }

    /// On btrfs (and any file system not known to write allocated space in place) a commit is one
    /// `pwrite`: no write through a mapping, no space allocated ahead, the file ends where the
    /// log ends. The mutex is still the lock.
    @Test func onACopyOnWriteFileSystemCommitsAppendWithPwrite() throws {
        try withTemporaryDirectory { directory throws in
            let fileSystem = RecordingFileSystem(fileSystemType: OtherFileSystem.btrfs)
            let io = FileIO(fileSystem: fileSystem)
            let storage = openStore(directory, io: io)
            for index in 0..<50 { try storage.storeOrThrow(index, forKey: "k\(index % 5)") }
            try storage.bulkStoreOrThrow(items: ["a": 1, "b": "two"])

            let events = fileSystem.events
            #expect(!events.contains { if case .wroteThroughMapping = $0 { true } else { false } })
            #expect(!events.contains { if case .allocated = $0 { true } else { false } })
            #expect(events.contains { if case .wrote(_, true) = $0 { true } else { false } })
            #expect(try fileSize(storage.fileURL) == committedLength(storage.fileURL))
            let reopened = openStore(directory, io: io)
            #expect(reopened.integer(forKey: "k4") == 49)
            #expect(reopened.retrieve(type: String.self, forKey: "b") == "two")
        }
    }

    /// A data file another program made longer without allocating it (`truncate -s`: a sparse
    /// tail) gets its tail allocated before the next commit writes into it, so that a full disk
    /// fails that allocation with `.noSpace` instead of the write with `SIGBUS`.
    @Test(.enabled(if: isLinux, "only Linux appends through a mapping"))
    func aSparseTailIsAllocatedBeforeItIsWrittenThrough() throws {
        try withTemporaryDirectory { directory throws in
            try makeStore(in: directory, values: [("k", 1)])
            let url = directory.appendingPathComponent("store/store.tinystorage")
            let log = try committedLength(url)
            try truncateFile(url, to: 4 * AppendMapping.granularity)

            let (storage, fileSystem) = openRecordedExt4Store(directory)
            try storage.storeOrThrow(2, forKey: "k")
            let allocations = fileSystem.events.compactMap { event -> Int? in
                if case .allocated(let count, _) = event { count } else { nil }
            }
            #expect(allocations == [4 * AppendMapping.granularity - log])
            #expect(openStore(directory).integer(forKey: "k") == 2)
        }
    }

    /// Where the file system is one of those (the test's temporary directory on this project's
    /// machines is ext4), commits write through the mapping and space is allocated ahead.
    @Test(.enabled(if: isLinux, "only Linux appends through a mapping"))
    func onExt4CommitsWriteThroughTheMapping() throws {
        try withTemporaryDirectory { directory throws in
            let (storage, fileSystem) = openRecordedExt4Store(directory)
            for index in 0..<10 { try storage.storeOrThrow(index, forKey: "k") }
            let mapped = fileSystem.events.filter { if case .wroteThroughMapping = $0 { true } else { false } }
            #expect(mapped.count == 10)
            #expect(try fileSize(storage.fileURL) == AppendMapping.granularity)
            #expect(openStore(directory).integer(forKey: "k") == 9)
        }
    }

    /// An open that only reads does not ask the file system's type (`fstatfs`): the first commit
    /// asks, once, before it appends, and takes the path the type calls for, as when the answer
    /// came at open: a mapping on ext4 (Linux), `pwrite` on btrfs.
    @Test(
        .enabled(if: isLinux, "with flock as the commit lock, no commit appends through a mapping"),
        arguments: [(AppendMapping.ext4, true), (OtherFileSystem.btrfs, false)])
    func theFileSystemIsAskedAtTheFirstCommitNotAtOpen(type: Int64, mapped: Bool) throws {
        try withTemporaryDirectory { directory throws in
            try makeStore(in: directory, values: [("k", 1), ("text", "one")])
            let fileSystem = RecordingFileSystem(fileSystemType: type)
            let storage = openStore(directory, io: FileIO(fileSystem: fileSystem))
            #expect(storage.integer(forKey: "k") == 1)
            #expect(!fileSystem.events.contains(.askedFileSystemType))

            for index in 2...4 { try storage.storeOrThrow(index, forKey: "k") }
            let events = fileSystem.events
            #expect(events.filter { $0 == .askedFileSystemType }.count == 1)
            let asked = try #require(events.firstIndex(of: .askedFileSystemType))
            let firstWrite = try #require(events.firstIndex { if case .wrote = $0 { true } else { false } })
            #expect(asked < firstWrite)
            let throughMapping = events.filter { if case .wroteThroughMapping = $0 { true } else { false } }
            #expect(throughMapping.count == (mapped ? 3 : 0))
            #expect(openStore(directory).integer(forKey: "k") == 4)
            #expect(openStore(directory).retrieve(type: String.self, forKey: "text") == "one")
        }
    }

    /// The data file is mapped once, with address space to spare (see
    /// `AppendMapping.reservation(for:)`): a log that grows through several allocations is
    /// never unmapped and mapped again, and everything it holds reads back.
    @Test(.enabled(if: isLinux, "only Linux appends through a mapping"))
    func aGrowingLogIsMappedOnce() throws {
        try withTemporaryDirectory { directory throws in
            let (storage, fileSystem) = openRecordedExt4Store(directory)
            let value = String(repeating: "v", count: 2_000)
            try storeNumbered(value, count: 200, in: storage)

            let events = fileSystem.events
            let allocations = events.filter { if case .allocated = $0 { true } else { false } }
            let dataMappings = events.filter {
                if case .mapped(let length) = $0 { length >= AppendMapping.minimumReservation } else { false }
            }
            #expect(allocations.count >= 3, "the log did not grow: \(allocations)")
            #expect(dataMappings.count == 1, "\(dataMappings)")
            expectNumbered(value, at: [0, 99, 199], in: directory)
        }
    }

    /// A log that outgrows the address space its mapping reserved (see
    /// `AppendMapping.reservation(for:)`) is mapped again, with twice its size reserved, and
    /// nothing is lost on the way: five values of 15 MiB take the file past the first 64 MiB.
    @Test(.enabled(if: isLinux, "only Linux appends through a mapping"))
    func aLogPastTheReservedSpaceIsMappedAgainLarger() throws {
        try withTemporaryDirectory { directory throws in
            let (storage, fileSystem) = openRecordedExt4Store(directory)
            let value = String(repeating: "m", count: 15 << 20)
            for index in 0..<5 { try storage.storeOrThrow("\(index)\(value)", forKey: "big\(index)") }

            let dataMappings = fileSystem.events.compactMap { event -> Int? in
                if case .mapped(let length) = event, length >= AppendMapping.minimumReservation { length } else { nil }
            }
            #expect(dataMappings.count == 2, "\(dataMappings)")
            #expect(dataMappings.last ?? 0 > AppendMapping.minimumReservation)
            let reopened = openStore(directory)
            for index in [0, 4] {
                #expect(reopened.retrieve(type: String.self, forKey: "big\(index)") == "\(index)\(value)")
            }
        }
    }

    /// The pages just ahead of the log are faulted in before commits reach them (see
    /// `AppendMapping.prepare(ahead:)`): on a background queue, never with the cross-process
    /// lock held, each page once, only within the file (a page past its end is `SIGBUS`), and
    /// never more than `AppendMapping.preparedAhead` past the log, which bounds the zeros a
    /// writeback can write ahead of it.
    @Test(.enabled(if: isLinux, "only Linux appends through a mapping"))
    func pagesAheadOfTheLogArePreparedOffTheLockWithinTheFile() throws {
        try withTemporaryDirectory { directory throws in
            let (storage, fileSystem) = openRecordedExt4Store(directory)
            let value = String(repeating: "p", count: 150)
            for index in 0..<2_000 { try storage.storeOrThrow("\(value)\(index)", forKey: "key\(index % 700)") }
            AppendMapping.waitForPreparedPages()

            let prepared = fileSystem.events.compactMap { event -> (range: Range<Int>, locked: Bool)? in
                guard case .prefaulted(let offset, let count, let locked) = event else { return nil }
                return (offset..<offset + count, locked)
            }
            let log = try committedLength(storage.fileURL)
            let size = try fileSize(storage.fileURL)
            let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
            #expect(prepared.count >= 3, "\(prepared.count) ranges prepared")
            #expect(!prepared.contains { $0.locked }, "pages prepared under the file lock")
            #expect(prepared.allSatisfy { $0.range.lowerBound % pageSize == 0 && $0.range.upperBound <= size })
            #expect(prepared.allSatisfy { $0.range.upperBound <= log + AppendMapping.preparedAhead + pageSize })
            let ordered = prepared.map(\.range).sorted { $0.lowerBound < $1.lowerBound }
            #expect(zip(ordered, ordered.dropFirst()).allSatisfy { $0.upperBound <= $1.lowerBound }, "a page twice")
            #expect(openStore(directory).retrieve(type: String.self, forKey: "key0") == "\(value)1400")
        }
    }

    /// A store in `directory` whose file-system calls are recorded, on a file system that reports
    /// itself as ext4, so that commits write through a mapping.
    private func openRecordedExt4Store(_ directory: URL) -> (TinyStorage, RecordingFileSystem) {
        let fileSystem = RecordingFileSystem(fileSystemType: AppendMapping.ext4)
        return (openStore(directory, io: FileIO(fileSystem: fileSystem)), fileSystem)
    }

}
