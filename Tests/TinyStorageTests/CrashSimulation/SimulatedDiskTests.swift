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

/// The simulated disk itself: the calls answer as the kernel's do, and a crash leaves exactly the
/// states a disk with a volatile write cache can leave, no more and no fewer. Deterministic: every
/// test walks a fixed range of seeds.
@Suite struct SimulatedDiskTests {
    /// `/sim/box`, opened readable (so it can be synced and listed), on a fresh disk.
    struct Box {
        let disk: SimulatedDisk
        let io: FileIO
        let directory: FileIO.Directory

        init(disk: SimulatedDisk = SimulatedDisk()) throws {
            let io = disk.io
            disk.makeSettledDirectories(atPath: "/sim/box")
            let parent = try io.openDirectory(atPath: "/sim").get()
            defer { io.close(parent.fd) }
            let fd = try io.open(in: parent, "box", flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW).get()
            self.disk = disk
            self.io = io
            directory = FileIO.Directory(fd: fd, path: "/sim/box")
        }

        func create(_ name: String) throws -> Int32 {
            try io.open(in: directory, name, flags: O_RDWR | O_CREAT | O_EXCL, mode: 0o600).get()
        }

        func write(_ fd: Int32, _ bytes: [UInt8], at offset: Int) throws {
            try bytes.withUnsafeBytes { try io.write(fd, $0, at: offset).get() }
        }

        func syncDirectory() throws { try io.syncDirectory(directory).get() }

        /// Creates `name` holding `contents`, flushes it and its name, and returns it open.
        func createFlushed(_ name: String, _ contents: [UInt8]) throws -> Int32 {
            let fd = try create(name)
            try write(fd, contents, at: 0)
            try io.sync(fd).get()
            try syncDirectory()
            return fd
        }

        func path(_ name: String) -> String { "/sim/box/" + name }
    }

    static func sector(_ byte: UInt8, count: Int = SimulatedDisk.sectorSize) -> [UInt8] {
        [UInt8](repeating: byte, count: count)
    }

    // MARK: Durability

    @Test func syncedDataAndNamesSurviveEveryCrash() throws {
        let box = try Box()
        _ = try box.createFlushed("file", Self.sector(7, count: 1500))
        for seed in UInt64(0)..<200 {
            let after = box.disk.crash(seed: seed)
            #expect(after.contents(atPath: box.path("file")) == Self.sector(7, count: 1500), "seed \(seed)")
        }
    }

    @Test func unsyncedWritesAreLostKeptTornAndReordered() throws {
        let box = try Box()
        let fd = try box.create("file")
        try box.syncDirectory()
        try box.write(fd, Self.sector(0x61, count: 1024), at: 0)  // sectors 0 and 1
        try box.write(fd, Self.sector(0x62), at: 1024)  // sector 2, written later
        var seen: Set<String> = []
        for seed in UInt64(0)..<300 {
            let bytes = box.disk.crash(seed: seed).contents(atPath: box.path("file")) ?? []
            let sectors = (0..<3).map { index -> UInt8? in
                let start = index * SimulatedDisk.sectorSize
                guard start < bytes.count else { return nil }
                let slice = bytes[start..<min(start + SimulatedDisk.sectorSize, bytes.count)]
                return slice.allSatisfy { $0 == slice.first } ? slice.first : 0xFF
            }
            #expect(!sectors.contains(0xFF), "seed \(seed): a sector is torn inside itself")
            if bytes.allSatisfy({ $0 == 0 }) { seen.insert("lost") }
            if bytes == Self.sector(0x61, count: 1024) + Self.sector(0x62) { seen.insert("kept") }
            if sectors[0] != sectors[1], sectors[0] == 0x61 || sectors[1] == 0x61 { seen.insert("torn") }
            if sectors[2] == 0x62, sectors[0] != 0x61 || sectors[1] != 0x61 { seen.insert("reordered") }
            #expect(bytes.count <= 1536, "seed \(seed)")
        }
        #expect(seen == ["lost", "kept", "torn", "reordered"])
    }

    @Test func truncationsAndAllocationsAreUndoneOrKeptLikeWrites() throws {
        let box = try Box()
        let fd = try box.createFlushed("file", Self.sector(9, count: 1000))
        try box.io.truncate(fd, to: 10).get()
        try box.io.allocate(fd, offset: 0, length: 4096).get()
        #expect(box.disk.contents(atPath: box.path("file")) == Self.sector(9, count: 10) + Self.sector(0, count: 4086))
        var sizes: Set<Int> = []
        for seed in UInt64(0)..<100 {
            let bytes = box.disk.crash(seed: seed).contents(atPath: box.path("file")) ?? []
            sizes.insert(bytes.count)
            #expect(bytes.prefix(10).elementsEqual(Self.sector(9, count: 10)), "seed \(seed): flushed bytes")
        }
        #expect(sizes == [1000, 10, 4096])
    }

    @Test func aRenameIsDurableOnlyOnceItsDirectoryIsSynced() throws {
        let box = try Box()
        _ = try box.createFlushed("new", [1, 2, 3])
        try box.io.rename(in: box.directory, "new", to: "final").get()
        var outcomes: Set<[String]> = []
        for seed in UInt64(0)..<100 {
            let names = box.disk.crash(seed: seed).names(inDirectoryAtPath: "/sim/box") ?? []
            outcomes.insert(names)
        }
        #expect(outcomes == [["new"], ["final"]], "one name or the other, never both or neither")

        let synced = try Box()
        let file = try synced.create("new")
        try synced.io.sync(file).get()
        try synced.syncDirectory()
        try synced.io.rename(in: synced.directory, "new", to: "final").get()
        try synced.syncDirectory()
        for seed in UInt64(0)..<50 {
            #expect(synced.disk.crash(seed: seed).names(inDirectoryAtPath: "/sim/box") == ["final"], "seed \(seed)")
        }
    }

    @Test func aNewFileFlushedInAnUnsyncedDirectoryCanVanish() throws {
        let box = try Box()
        let fd = try box.create("file")
        try box.write(fd, [1, 2, 3], at: 0)
        try box.io.sync(fd).get()
        var outcomes: Set<[UInt8]?> = []
        for seed in UInt64(0)..<100 {
            outcomes.insert(box.disk.crash(seed: seed).contents(atPath: box.path("file")))
        }
        #expect(outcomes == [nil, [1, 2, 3]], "gone, or there with its flushed bytes")
    }

    @Test func namespaceChangesSurviveAsAPrefix() throws {
        let box = try Box()
        for name in ["a", "b", "c"] { box.io.close(try box.create(name)) }
        try box.io.unlink(in: box.directory, "a").get()
        var outcomes: Set<[String]> = []
        for seed in UInt64(0)..<200 {
            outcomes.insert(box.disk.crash(seed: seed).names(inDirectoryAtPath: "/sim/box") ?? ["?"])
        }
        #expect(outcomes == [[], ["a"], ["a", "b"], ["a", "b", "c"], ["b", "c"]])
    }

    @Test func aMakeDirectoryIsDurableOnlyOnceItsParentIsSynced() throws {
        let box = try Box()
        try box.io.makeDirectory(in: box.directory, "inner").get()
        var outcomes: Set<[String]> = []
        for seed in UInt64(0)..<50 {
            outcomes.insert(box.disk.crash(seed: seed).names(inDirectoryAtPath: "/sim/box") ?? ["?"])
        }
        #expect(outcomes == [[], ["inner"]])

        let synced = try Box()
        try synced.io.makeDirectory(in: synced.directory, "inner").get()
        try synced.syncDirectory()
        for seed in UInt64(0)..<20 {
            #expect(synced.disk.crash(seed: seed).names(inDirectoryAtPath: "/sim/box/inner") == [], "seed \(seed)")
        }
    }

    @Test func everyCrashStyleComesUpAndEachBehavesAsNamed() throws {
        let box = try Box()
        let fd = try box.create("file")
        try box.syncDirectory()
        try box.write(fd, Self.sector(1, count: 2048), at: 0)
        let kept = box.disk.crash(seed: 1, style: .keepsEverything).contents(atPath: box.path("file"))
        let lost = box.disk.crash(seed: 1, style: .losesEverything).contents(atPath: box.path("file"))
        #expect(kept == Self.sector(1, count: 2048))
        #expect(lost == [])
        var generator = SeededGenerator(seed: 5)
        let styles = Set((0..<200).map { _ in SimulatedDisk.randomStyle(using: &generator) })
        #expect(styles == Set(SimulatedDisk.CrashStyle.allCases))
    }

    @Test func aCrashBringsANewBootAndNothingOpen() throws {
        let box = try Box()
        let fd = try box.createFlushed("file", [])
        let after = box.disk.crash(seed: 3)
        #expect(after.bootIdentity != box.disk.bootIdentity)
        #expect(after.status(fd) == .failure(Errno(EBADF)), "descriptors do not survive a crash")
        #expect(after.changeCount == 0 && !after.isCrashed)
        #expect(after.crash(seed: 4).bootIdentity != after.bootIdentity)
    }

    // MARK: Crashing a running program

    @Test func anArmedCrashFailsItsCallAndEveryLaterOneAndKeepsTheStateBefore() throws {
        let box = try Box()
        let fd = try box.create("file")
        try box.syncDirectory()
        let start = box.disk.changeCount
        box.disk.armCrash(atChange: start + 2)
        try box.write(fd, [1], at: 0)
        try box.write(fd, [2], at: 1)
        #expect(throws: Errno.ioError) { try box.write(fd, [3], at: 2) }
        #expect(box.disk.isCrashed)
        #expect(box.io.read(fd, count: 3, at: 0) == .failure(.ioError))
        #expect(box.io.status(in: box.directory, "file").map(\.size) == .failure(.ioError))
        #expect(box.disk.crash(seed: 0, style: .keepsEverything).contents(atPath: box.path("file")) == [1, 2])
    }

    @Test func onlyCallsThatChangeTheDiskAreCounted() throws {
        let box = try Box()
        let fd = try box.create("file")
        let before = box.disk.changeCount
        _ = box.io.read(fd, count: 10, at: 0)
        _ = box.io.status(fd)
        _ = box.io.entries(of: box.directory)
        try box.io.lock(fd, exclusive: true).get()
        try box.io.lock(fd, exclusive: false).get()
        #expect(box.disk.changeCount == before)
        try box.write(fd, [1], at: 0)
        try box.io.sync(fd).get()
        try box.io.truncate(fd, to: 0).get()
        try box.io.rename(in: box.directory, "file", to: "other").get()
        try box.io.unlink(in: box.directory, "other").get()
        #expect(box.disk.changeCount == before + 5)
    }

    // MARK: Calls and their errors

    @Test func openFlagsAndErrorsAnswerAsTheKernelDoes() throws {
        let box = try Box()
        box.io.close(try box.create("file"))
        box.disk.plantSymbolicLink(atPath: box.path("link"), to: "file")
        try box.io.makeDirectory(in: box.directory, "dir").get()
        let io = box.io
        let directory = box.directory
        #expect(io.open(in: directory, "file", flags: O_RDWR | O_CREAT | O_EXCL) == .failure(.exists))
        #expect(io.open(in: directory, "link", flags: O_RDWR | O_CREAT | O_EXCL) == .failure(.exists))
        #expect(io.open(in: directory, "link", flags: O_RDONLY | O_NOFOLLOW) == .failure(.symbolicLinkLoop))
        #expect(io.open(in: directory, "missing", flags: O_RDONLY) == .failure(.notFound))
        #expect(io.open(in: directory, "file", flags: O_RDONLY | O_DIRECTORY) == .failure(.notDirectory))
        #expect(io.open(in: directory, "dir", flags: O_RDWR) == .failure(.isDirectory))
        #expect(io.open(in: directory, "file/inside", flags: O_RDONLY) == .failure(.notDirectory))
        #expect(failure(io.unlink(in: directory, "dir")) == .isDirectory)
        #expect(failure(io.makeDirectory(in: directory, "dir")) == .exists)
        #expect(io.status(in: directory, "link").map(\.kind) == .success(.symbolicLink), "not followed")
        #expect(failure(io.renameWithoutReplacing(in: directory, "file", to: "dir")) == .exists)
        #expect(failure(io.rename(in: directory, "file", to: "dir")) == .isDirectory)
        #expect(io.read(12345, count: 1, at: 0) == .failure(Errno(EBADF)))

        let followed = try io.open(in: directory, "link", flags: O_RDWR).get()
        try box.write(followed, [5], at: 0)
        #expect(box.disk.contents(atPath: box.path("file")) == [5], "a link is followed without O_NOFOLLOW")
        let readOnly = try io.open(in: directory, "file", flags: O_RDONLY).get()
        #expect(failure([UInt8(1)].withUnsafeBytes { io.write(readOnly, $0, at: 0) }) == Errno(EBADF))
        #expect(failure(io.truncate(readOnly, to: 0)) == Errno(EINVAL))
        let truncating = try io.open(in: directory, "file", flags: O_RDWR | O_TRUNC).get()
        #expect(io.status(truncating).map(\.size) == .success(0))

        let parent = try io.openDirectory(atPath: "/sim").get()
        #expect(failure(io.sync(parent.fd)) == Errno(EBADF), "an O_PATH descriptor cannot be flushed")
        #expect(failure(io.openDirectory(atPath: "/sim/box/file")) == .notDirectory)
        #expect(failure(io.openDirectory(atPath: "/elsewhere")) == .notFound)
        #expect(io.entries(of: directory) == .success(["dir", "file", "link"]))
    }

    @Test func plantedLinksFIFOsAndOwnersAreReportedAsTheyAre() throws {
        let box = try Box()
        let fd = try box.create("file")
        try box.write(fd, [1, 2], at: 0)
        box.disk.plantHardLink(atPath: box.path("second"), to: box.path("file"))
        box.disk.plantFIFO(atPath: box.path("pipe"))
        box.disk.setOwnership(atPath: box.path("file"), owner: 99, permissions: 0o644)
        let status = try box.io.status(in: box.directory, "second").get()
        #expect(status.linkCount == 2 && status.owner == 99 && status.permissions == 0o644 && status.size == 2)
        #expect(try box.io.status(in: box.directory, "pipe").get().kind == .fifo)
        #expect(
            box.io.open(in: box.directory, "pipe", flags: O_WRONLY | O_NONBLOCK) == .failure(.noSuchDeviceOrAddress))
        box.io.close(try box.io.open(in: box.directory, "pipe", flags: O_RDONLY | O_NONBLOCK).get())
        #expect(box.disk.timesOpened(atPath: box.path("pipe")) == 1)
        #expect(box.disk.effectiveUserID == SimulatedDisk.user)
        let survivor = box.disk.crash(seed: 0, style: .losesEverything)
        #expect(survivor.status(atPath: box.path("second"))?.linkCount == 2, "planted links are durable")
    }

    @Test func aLockMakesAnotherDescriptorWaitUntilItIsReleased() async throws {
        let box = try Box()
        let first = try box.create("lock")
        let second = try box.io.open(in: box.directory, "lock", flags: O_RDWR).get()
        try box.io.lock(first, exclusive: true).get()
        try box.io.lock(first, exclusive: true).get()  // again on the same descriptor: no wait
        let acquired = Locked(false)
        let disk = box.disk
        let waiter = Thread {
            if case .success = disk.lock(second, .exclusive, waiting: true) { acquired.withLock { $0 = true } }
        }
        waiter.start()
        while disk.lockWaiterCount == 0 { await Task.yield() }
        #expect(!acquired.withLock { $0 }, "the second descriptor waits while the first holds the lock")
        try box.io.lock(first, exclusive: false).get()
        while !acquired.withLock({ $0 }) { await Task.yield() }
        #expect(disk.lockWaiterCount == 0)
    }

    @Test func closingReleasesALockAndACrashWakesItsWaiters() async throws {
        let box = try Box()
        let first = try box.create("lock")
        let second = try box.io.open(in: box.directory, "lock", flags: O_RDWR).get()
        let third = try box.io.open(in: box.directory, "lock", flags: O_RDWR).get()
        try box.io.lock(first, exclusive: true).get()
        box.io.close(first)
        try box.io.lock(second, exclusive: true).get()
        let result = Locked<Result<Void, Errno>?>(nil)
        let disk = box.disk
        Thread { result.withLock { $0 = disk.lock(third, .exclusive, waiting: true) } }.start()
        while disk.lockWaiterCount == 0 { await Task.yield() }
        disk.crashNow()
        while result.withLock({ $0 }) == nil { await Task.yield() }
        #expect(result.withLock { $0 }.flatMap(failure) == .ioError)
    }

    // MARK: Mappings

    @Test func aMappingIsSharedPageAlignedAndCoherentWithReadsAndWrites() throws {
        let box = try Box()
        let fd = try box.create("mapped")
        try box.io.truncate(fd, to: 4096).get()
        let page = try box.io.mapShared(fd, length: 4096).get()
        let again = try box.io.mapShared(fd, length: 4096).get()
        defer {
            box.io.unmap(page, length: 4096)
            box.io.unmap(again, length: 4096)
        }
        #expect(page == again, "two mappings of one file share their pages")
        #expect(Int(bitPattern: page) % 4096 == 0)
        try box.write(fd, [1, 2, 3], at: 100)
        #expect(page.load(fromByteOffset: 101, as: UInt8.self) == 2, "a write is seen through the mapping")
        page.storeBytes(of: 9, toByteOffset: 3000, as: UInt8.self)
        #expect(try box.io.read(fd, count: 1, at: 3000).get() == [9], "a store through the mapping is seen by pread")
        try box.io.truncate(fd, to: 50).get()
        try box.io.truncate(fd, to: 4096).get()
        #expect(page.load(fromByteOffset: 101, as: UInt8.self) == 0, "bytes cut off read as zeros when regrown")
    }

    /// A mapping may reach past the end of its file (a store reserves address space the file
    /// grows into), but the kernel answers a touch there with `SIGBUS`: the disk refuses a write
    /// or a prefault past the end with `EFAULT`, and allows both once the file has grown.
    @Test func aMappingPastTheEndOfItsFileIsUsableOnlyOnceTheFileReachesThatFar() throws {
        let box = try Box()
        let fd = try box.create("mapped")
        try box.io.allocate(fd, offset: 0, length: 4096).get()
        let page = try box.io.mapShared(fd, length: 3 * 4096).get()
        defer { box.io.unmap(page, length: 3 * 4096) }
        #expect(failure(box.io.willWriteMapping(page, offset: 4000, length: 200)) == Errno(EFAULT))
        #expect(failure(box.io.prefaultForWriting(page, offset: 4096, length: 4096)) == Errno(EFAULT))
        #expect(failure(box.io.prefaultForWriting(page, offset: 0, length: 4096)) == nil)

        try box.io.allocate(fd, offset: 4096, length: 2 * 4096).get()
        #expect(failure(box.io.prefaultForWriting(page, offset: 4096, length: 2 * 4096)) == nil)
        #expect(failure(box.io.willWriteMapping(page, offset: 4000, length: 200)) == nil)
        page.storeBytes(of: 7, toByteOffset: 4100, as: UInt8.self)
        #expect(try box.io.read(fd, count: 1, at: 4100).get() == [7])
    }

    @Test func bytesWrittenThroughAMappingAreDurableOnlyOnceSynced() throws {
        let box = try Box()
        let fd = try box.create("mapped")
        try box.io.truncate(fd, to: 4096).get()
        try box.io.sync(fd).get()
        try box.syncDirectory()
        let page = try box.io.mapShared(fd, length: 4096).get()
        defer { box.io.unmap(page, length: 4096) }
        page.storeBytes(of: 0xAB, toByteOffset: 10, as: UInt8.self)
        page.storeBytes(of: 0xCD, toByteOffset: 2000, as: UInt8.self)
        var outcomes: Set<[UInt8]> = []
        for seed in UInt64(0)..<100 {
            let bytes = box.disk.crash(seed: seed).contents(atPath: box.path("mapped")) ?? []
            outcomes.insert([bytes[10], bytes[2000]])
        }
        #expect(outcomes == [[0, 0], [0xAB, 0], [0, 0xCD], [0xAB, 0xCD]], "each sector on its own")

        let synced = try Box()
        let file = try synced.create("mapped")
        try synced.io.truncate(file, to: 4096).get()
        try synced.syncDirectory()
        let mapping = try synced.io.mapShared(file, length: 4096).get()
        defer { synced.io.unmap(mapping, length: 4096) }
        mapping.storeBytes(of: 0xAB, toByteOffset: 10, as: UInt8.self)
        try synced.disk.syncMapping(mapping, length: 4096).get()
        for seed in UInt64(0)..<30 {
            #expect(synced.disk.crash(seed: seed).contents(atPath: synced.path("mapped"))?[10] == 0xAB, "seed \(seed)")
        }
    }
}

/// The error a call failed with, or `nil` when it succeeded.
func failure<T>(_ result: Result<T, Errno>) -> Errno? {
    if case .failure(let error) = result { return error }
    return nil
}
