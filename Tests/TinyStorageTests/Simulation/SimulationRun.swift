import Foundation

@testable import TinyStorage

/// What a simulated process does, one operation after another.
enum SimulatedOperation: Equatable, CustomStringConvertible {
    case set(String, Int)
    case remove(String)
    case increment
    case read(String)
    case synchronize

    var description: String {
        switch self {
        case .set(let key, let value): "set \(key) = \(value)"
        case .remove(let key): "remove \(key)"
        case .increment: "increment \(SimulationHistory.counter)"
        case .read(let key): "read \(key)"
        case .synchronize: "synchronize"
        }
    }
}

/// What happens to the machine, the disk or the store's files at a point of the schedule.
enum SimulatedFault: Equatable, CustomStringConvertible {
    /// The process doing slot `slot`'s work is killed (`kill -9`); another takes over its work.
    case kill(slot: Int)
    /// Power loss and a restart: the disk keeps what a crash chosen by `seed` leaves.
    case powerLoss(seed: UInt64)
    /// The disk loses its cache without a restart (the lock file's page stays this boot's).
    case cacheLoss(seed: UInt64)
    /// `store.lock` deleted under the running processes.
    case deleteLockFile
    /// `store.lock` replaced by a new, empty file under the running processes.
    case replaceLockFile
    /// `bytes` written over the lock file's page at `offset`.
    case overwritePage(offset: Int, bytes: [UInt8])
    /// A backup tool copies `file` (the data file, or the lock file) as it is now.
    case copy(StoreFile)
    /// `file` put back from its last copy: in place (`cp`) or by a rename over it (`rsync`). The
    /// data file only while no process has the store open: the processes are stopped first.
    case restore(StoreFile, inPlace: Bool)
    /// The disk full, or space again.
    case diskFull(Bool)
    /// The store's files made unreadable, or readable again.
    case deny(Bool)

    enum StoreFile: String, Equatable {
        case data = "store.tinystorage"
        case lock = "store.lock"
    }

    var description: String {
        switch self {
        case .kill(let slot): "kill the process of slot \(slot)"
        case .powerLoss(let seed): "power loss (crash seed \(seed))"
        case .cacheLoss(let seed): "disk cache lost without a restart (crash seed \(seed))"
        case .deleteLockFile: "store.lock deleted"
        case .replaceLockFile: "store.lock replaced by an empty file"
        case .overwritePage(let offset, let bytes): "\(bytes.count) bytes written over the lock page at \(offset)"
        case .copy(let file): "\(file.rawValue) copied"
        case .restore(let file, let inPlace):
            "\(file.rawValue) put back from its copy \(inPlace ? "in place" : "by a rename")"
        case .diskFull(let full): full ? "disk full" : "disk space again"
        case .deny(let denied): denied ? "store files made unreadable" : "store files readable again"
        }
    }
}

/// Everything a simulation run does, all of it from one seed, so that a run replays exactly; and
/// what shrinking changes (faults removed, operations cut) to find the shortest run that still
/// fails.
struct SimulationPlan: CustomStringConvertible {
    var seed: UInt64
    var platform: Platform
    /// Whether appends go through a mapping (tmpfs) or `pwrite` (btrfs), with the Linux lock.
    var fileSystemType: Int64
    var durabilities: [TinyStorage.Durability]
    var operations: [[SimulatedOperation]]
    /// Each fault with the choice of the scheduler it comes before.
    var faults: [(choice: Int, fault: SimulatedFault)]
    var fullFlushUnsupported: Bool

    /// Which faults a plan may draw.
    struct FaultKinds: OptionSet {
        let rawValue: Int
        static let kills = FaultKinds(rawValue: 1 << 0)
        static let powerLosses = FaultKinds(rawValue: 1 << 1)
        static let cacheLosses = FaultKinds(rawValue: 1 << 2)
        static let lockFile = FaultKinds(rawValue: 1 << 3)
        static let restores = FaultKinds(rawValue: 1 << 4)
        static let diskFull = FaultKinds(rawValue: 1 << 5)
        static let permissions = FaultKinds(rawValue: 1 << 6)
        static let fullFlush = FaultKinds(rawValue: 1 << 7)
        static let page = FaultKinds(rawValue: 1 << 8)
        static let all = FaultKinds(rawValue: (1 << 9) - 1)

        static let named: [String: FaultKinds] = [
            "kills": .kills, "powerLosses": .powerLosses, "cacheLosses": .cacheLosses, "lockFile": .lockFile,
            "restores": .restores, "diskFull": .diskFull, "permissions": .permissions, "fullFlush": .fullFlush,
            "page": .page, "all": .all, "none": [],
        ]

        init(rawValue: Int) { self.rawValue = rawValue }

        /// The kinds a comma-separated list names.
        init(names: String) throws(UnknownFaultKind) {
            self = []
            for name in names.split(separator: ",") {
                guard let kind = Self.named[String(name)] else {
                    throw UnknownFaultKind(name: String(name), known: Self.named.keys.sorted())
                }
                formUnion(kind)
            }
        }
    }

    struct UnknownFaultKind: Error, CustomStringConvertible {
        var name: String
        var known: [String]
        var description: String { "no fault kind '\(name)': one of \(known.joined(separator: ", "))" }
    }

    init(seed: UInt64, platform: Platform, faults kinds: FaultKinds = .all) {
        self.seed = seed
        self.platform = platform
        var generator = SeededGenerator(seed: seed ^ 0x5151_0A0B_0C0D_0E0F)
        fileSystemType =
            platform.commitLock == .sharedMutex && Bool.random(using: &generator)
            ? OtherFileSystem.btrfs : AppendMapping.tmpfs
        let slots = Int.random(in: 2...3, using: &generator)
        durabilities = (0..<slots).map { _ in Bool.random(using: &generator) ? .immediate : .standard }
        var nextValue = 1
        operations = (0..<slots).map { slot in
            (0..<Int.random(in: 4...12, using: &generator)).map { _ in
                let own = "s\(slot)\(Bool.random(using: &generator) ? "a" : "b")"
                switch Int.random(in: 0..<100, using: &generator) {
                case 0..<28:
                    defer { nextValue += 1 }
                    return .set(own, slot * 1_000_000 + nextValue)
                case 28..<34: return .remove(own)
                case 34..<56: return .increment
                case 56..<66: return .synchronize
                case 66..<82: return .read(SimulationHistory.counter)
                default:
                    return .read(
                        "s\(Int.random(in: 0..<slots, using: &generator))\(Bool.random(using: &generator) ? "a" : "b")")
                }
            }
        }
        fullFlushUnsupported =
            kinds.contains(.fullFlush) && platform.commitLock == .fileLock
            && Int.random(in: 0..<6, using: &generator) == 0
        faults = []
        let count = kinds.isEmpty ? 0 : Int.random(in: 0...4, using: &generator)
        let horizon = operations.map(\.count).reduce(0, +) * 14
        let drawn: [FaultKinds] = [
            .kills, .powerLosses, .cacheLosses, .lockFile, .restores, .restores, .diskFull, .permissions, .page,
        ]
        let enabled = drawn.indices.filter { kinds.contains(drawn[$0]) }
        for _ in 0..<(enabled.isEmpty ? 0 : count) {
            let choice = Int.random(in: 1...horizon, using: &generator)
            let later = Int.random(in: choice...(choice + horizon / 2), using: &generator)
            switch enabled.randomElement(using: &generator) {
            case 0 where kinds.contains(.kills):
                faults.append((choice, .kill(slot: Int.random(in: 0..<slots, using: &generator))))
            case 1 where kinds.contains(.powerLosses):
                faults.append((choice, .powerLoss(seed: generator.next())))
            case 2 where kinds.contains(.cacheLosses):
                faults.append((choice, .cacheLoss(seed: generator.next())))
            case 3 where kinds.contains(.lockFile):
                faults.append((choice, Bool.random(using: &generator) ? .deleteLockFile : .replaceLockFile))
            case 4 where kinds.contains(.restores):
                let file: SimulatedFault.StoreFile = Bool.random(using: &generator) ? .data : .lock
                faults.append((choice, .copy(file)))
                faults.append((later, .restore(file, inPlace: Bool.random(using: &generator))))
            case 5 where kinds.contains(.restores):
                // A whole folder copied and put back, each file at its own moment, in either order.
                let order: [SimulatedFault.StoreFile] =
                    Bool.random(using: &generator) ? [.data, .lock] : [.lock, .data]
                faults.append((choice, .copy(order[0])))
                faults.append((choice + Int.random(in: 0...20, using: &generator), .copy(order[1])))
                let inPlace = Bool.random(using: &generator)
                faults.append((later, .restore(order[1], inPlace: inPlace)))
                faults.append((later + Int.random(in: 0...20, using: &generator), .restore(order[0], inPlace: inPlace)))
            case 6 where kinds.contains(.diskFull):
                faults.append((choice, .diskFull(true)))
                faults.append((later, .diskFull(false)))
            case 7 where kinds.contains(.permissions):
                faults.append((choice, .deny(true)))
                faults.append((later, .deny(false)))
            case 8 where kinds.contains(.page):
                let offset =
                    [0, 8, 16, 24, 32, 64, 72, 80, 256, 272, 280, 288, 296].randomElement(using: &generator) ?? 0
                let bytes = (0..<Int.random(in: 1...16, using: &generator)).map { _ in
                    UInt8.random(in: 0...255, using: &generator)
                }
                faults.append((choice, .overwritePage(offset: offset, bytes: bytes)))
            default:
                break
            }
        }
        faults.sort { $0.choice < $1.choice }
    }

    var description: String {
        var lines = [
            "seed \(seed), \(platform.commitLock == .fileLock ? "Apple semantics (flock, pwrite)" : "Linux semantics (robust mutex, \(fileSystemType == AppendMapping.tmpfs ? "mapped appends" : "pwrite appends"))")"
                + (fullFlushUnsupported ? ", full flush unsupported" : "")
        ]
        for (slot, operations) in operations.enumerated() {
            lines.append(
                "slot \(slot) (\(durabilities[slot])): \(operations.map(\.description).joined(separator: "; "))")
        }
        lines.append(
            "faults: "
                + (faults.isEmpty
                    ? "none" : faults.map { "before choice \($0.choice): \($0.fault)" }.joined(separator: "; ")))
        return lines.joined(separator: "\n")
    }
}

/// One run of a plan: the processes, the disk they share, the faults, and the history checked
/// against the model. Returns the violations found.
final class SimulationRun: @unchecked Sendable {
    // @unchecked: touched only by the simulated thread holding the turn (the faults run on it,
    // before the scheduler's choice), or by the driver while no simulated thread runs.
    static let container = URL(fileURLWithPath: SimulatedStore.containerPath, isDirectory: true)

    let plan: SimulationPlan
    let scheduler: SimulationScheduler
    let history = SimulationHistory()
    private(set) var trace: [String] = []
    private let tracing: Bool
    private var disk: SimulatedDisk
    private let machine: SimulatedMachine
    private var processes: [SimulatedProcess] = []
    /// Each slot's next operation; its current process.
    private var nextOperation: [Int]
    private var current: [SimulatedProcess?]
    private var copies: [SimulatedFault.StoreFile: (bytes: [UInt8], at: Int)] = [:]
    private var faultIndex = 0
    private let stores = Locked<[TinyStorage]>([])
    /// Where the stores announce: suspended until the run is over.
    private let announcing = DispatchQueue(label: "TinyStorage.simulation.announcements")
    private let recorders = Locked<[Int: AnnouncementRecorder]>([:])
    /// When each process's first operation that succeeded returned (its store was open and read
    /// then: an open that fails, the store unavailable, has read nothing to announce changes
    /// from); when its last read began (which caught it up).
    private var opened: [Int: Int] = [:]
    private var lastRead: [Int: Int] = [:]
    private(set) var stall: SimulationScheduler.Stall?

    init(_ plan: SimulationPlan, tracing: Bool = false) {
        self.plan = plan
        self.tracing = tracing
        scheduler = SimulationScheduler(seed: plan.seed)
        disk = SimulatedStore.makeDisk(boot: plan.seed | 1, fileSystemType: plan.fileSystemType)
        machine = SimulatedMachine(deniesWithNotPermitted: plan.platform.deniesWithNotPermitted)
        machine.faults.withLock { $0.fullFlushUnsupported = plan.fullFlushUnsupported }
        // NB: then `.immediate` commits and `synchronize()` fail, saying why (SPEC §7).
        if plan.fullFlushUnsupported { history.noteFault() }
        nextOperation = Array(repeating: 0, count: plan.operations.count)
        current = Array(repeating: nil, count: plan.operations.count)
        announcing.suspend()
    }

    /// Runs the plan, then a last process that reads every key; returns the violations.
    func run() -> [SimulationHistory.Violation] {
        if tracing { scheduler.trace = { [self] line in record(line) } }
        scheduler.beforeChoice = { [self] choice in injectFaults(before: choice) }
        for slot in plan.operations.indices { startProcess(for: slot) }
        scheduler.runUntilQuiet()
        if stall == nil { stall = scheduler.stall }
        // The faults planned past the end do not happen; the disk gets space and the files their
        // permissions back, and a last process reads everything.
        machine.faults.withLock {
            $0.diskFull = false
            $0.denied = false
        }
        if stall == nil {
            faultIndex = plan.faults.count
            startFinalReader()
            scheduler.runUntilQuiet()
            stall = scheduler.stall
        }
        if stall == nil {
            for process in processes where !process.isKilled {
                guard let opened = opened[process.id], let recorder = recorders.withLock({ $0[process.id] }) else {
                    continue
                }
                history.checkAnnouncements(
                    recorder.changes.withLock { $0 }, of: process.id, opened: opened, caughtUp: lastRead[process.id])
            }
        }
        scheduler.release()
        announcing.resume()
        var violations = history.violations
        if let stall { violations.append(SimulationHistory.Violation(guarantee: "progress", detail: "\(stall)")) }
        return violations
    }

    private func note(_ line: @autoclosure () -> String) {
        if tracing { record(line()) }
    }

    private static let printsLive = ProcessInfo.processInfo.environment["TINYSTORAGE_SIMULATION_LIVE"] != nil

    private func record(_ line: String) {
        if Self.printsLive { print(line) }
        trace.append(line)
    }

    // MARK: Processes

    private func openStore(in process: SimulatedProcess, durability: TinyStorage.Durability) -> TinyStorage {
        var options = Engine.Options(
            backgroundFlushes: true, watchesChanges: false, compactsInBackground: false, platform: plan.platform)
        options.flushScheduler = process.backgroundScheduler
        options.indexBuildScheduler = process.backgroundScheduler
        options.drainScheduler = process.backgroundScheduler
        // NB: announcements go to a queue that runs only once the run is over: the changes are
        // recorded as the delivery hands them to its listener, on the process's background thread.
        let store = TinyStorage(
            insideDirectory: Self.container, name: "store", durability: durability, io: FileIO(fileSystem: process),
            notificationQueue: announcing, logger: TestLogger(), options: options)
        let recorder = AnnouncementRecorder()
        store.engine.setListener(recorder)
        recorders.withLock { $0[process.id] = recorder }
        stores.withLock { $0.append(store) }
        return store
    }

    private func startProcess(for slot: Int) {
        guard nextOperation[slot] < plan.operations[slot].count else { return }
        let process = SimulatedProcess(
            id: processes.count, slot: slot, disk: disk, machine: machine, scheduler: scheduler)
        processes.append(process)
        current[slot] = process
        note("start P\(process.id) for slot \(slot)")
        process.start { [self] process in
            guard !Self.isGone(process) else { return }
            let store = openStore(in: process, durability: plan.durabilities[slot])
            while !Self.isGone(process), nextOperation[slot] < plan.operations[slot].count {
                let operation = plan.operations[slot][nextOperation[slot]]
                nextOperation[slot] += 1
                perform(operation, on: store, in: process, durability: plan.durabilities[slot])
            }
            // A last read catches the store up with every commit, so it has announced them all.
            if !Self.isGone(process) {
                perform(.read(SimulationHistory.counter), on: store, in: process, durability: plan.durabilities[slot])
            }
        }
    }

    /// Whether what `process` does no longer counts: it was killed, or the run is over and its
    /// thread runs on to its end.
    private static func isGone(_ process: SimulatedProcess) -> Bool {
        process.isKilled || SimulationScheduler.SimulatedThread.current?.freeRunning == true
    }

    private func startFinalReader() {
        let process = SimulatedProcess(
            id: processes.count, slot: -1, disk: disk, machine: machine, scheduler: scheduler)
        processes.append(process)
        note("start P\(process.id), the last reader")
        let keys = (0..<plan.operations.count).flatMap { ["s\($0)a", "s\($0)b"] } + [SimulationHistory.counter]
        process.start { [self] process in
            guard !Self.isGone(process) else { return }
            let store = openStore(in: process, durability: .standard)
            for key in keys { perform(.read(key), on: store, in: process, durability: .standard) }
        }
    }

    private func perform(
        _ operation: SimulatedOperation, on store: TinyStorage, in process: SimulatedProcess,
        durability: TinyStorage.Durability
    ) {
        let began = scheduler.tick()
        note("P\(process.id) begins \(operation) at \(began)")
        let writeID = "P\(process.id)@\(began)"
        func write(_ value: Int?, to key: String, _ body: () throws -> Void) {
            let index = history.beginWrite(value, to: key, process: process.id, writeID: writeID, at: began)
            do {
                try body()
                guard !Self.isGone(process) else { return }
                let time = scheduler.tick()
                history.acknowledgeWrite(index, to: key, at: time, flushed: durability == .immediate)
                if opened[process.id] == nil { opened[process.id] = time }
                note("P\(process.id) done at \(time)")
            } catch {
                guard !Self.isGone(process) else { return }
                history.failed(error, "P\(process.id) \(operation)")
                note("P\(process.id) \(operation) threw \(error)")
            }
        }
        switch operation {
        case .set(let key, let value):
            write(value, to: key) { try store.storeOrThrow(value, forKey: key, writeID: writeID) }
        case .remove(let key):
            write(nil, to: key) { try store.storeOrThrow(nil, forKey: key, writeID: writeID) }
        case .increment:
            write(nil, to: SimulationHistory.counter) {
                try store.update(SimulationHistory.counter, as: Int.self, writeID: writeID) { $0 = ($0 ?? 0) + 1 }
            }
        case .read(let key):
            do {
                let value = try store.retrieveOrThrow(type: Int.self, forKey: key)
                guard !Self.isGone(process) else { return }
                lastRead[process.id] = began
                let time = scheduler.tick()
                note("P\(process.id) read \(key) = \(value.map(String.init) ?? "nil") at \(time)")
                history.read(key, answered: value, by: process.id, began: began, at: time)
                if opened[process.id] == nil { opened[process.id] = time }
            } catch {
                guard !Self.isGone(process) else { return }
                history.failed(error, "P\(process.id) \(operation)")
                note("P\(process.id) \(operation) threw \(error)")
            }
        case .synchronize:
            do {
                try store.synchronize()
                guard !Self.isGone(process) else { return }
                let time = scheduler.tick()
                history.synchronized(process: process.id, began: began, at: time)
                if opened[process.id] == nil { opened[process.id] = time }
                note("P\(process.id) synchronized at \(time)")
            } catch {
                guard !Self.isGone(process) else { return }
                history.failed(error, "P\(process.id) \(operation)")
                note("P\(process.id) synchronize threw \(error)")
            }
        }
    }

    // MARK: Faults

    private func injectFaults(before choice: Int) {
        while faultIndex < plan.faults.count, plan.faults[faultIndex].choice <= choice {
            let fault = plan.faults[faultIndex].fault
            faultIndex += 1
            if case .copy = fault {} else { history.noteFault() }
            note("FAULT before choice \(choice): \(fault)")
            apply(fault)
        }
    }

    private var storePath: String { SimulatedStore.directoryPath }

    private func apply(_ fault: SimulatedFault) {
        switch fault {
        case .kill(let slot):
            guard let process = current[slot], !process.isKilled else { return }
            process.kill()
            startProcess(for: slot)
        case .powerLoss(let seed), .cacheLoss(let seed):
            stopEveryProcess()
            history.noteLoss(.flush(at: scheduler.tick()))
            if case .powerLoss = fault {
                disk = disk.crash(seed: seed, reboot: true)
            } else {
                disk = disk.crash(seed: seed, reboot: false)
            }
            machine.mutexes.withLock { $0.removeAll() }
            restartEverySlot()
        case .deleteLockFile:
            disk.withDirectory(storePath) { directory in
                _ = disk.unlink(in: directory, SimulatedFault.StoreFile.lock.rawValue)
            }
        case .replaceLockFile:
            disk.replaceFile(in: storePath, named: SimulatedFault.StoreFile.lock.rawValue, with: [], inPlace: false)
        case .overwritePage(let offset, let bytes):
            history.allowStaleReads(by: processes.filter { !$0.isKilled }.map(\.id))
            if disk.status(atPath: "\(storePath)/\(SimulatedFault.StoreFile.lock.rawValue)") != nil {
                disk.overwriteDurably(
                    atPath: "\(storePath)/\(SimulatedFault.StoreFile.lock.rawValue)", offset: offset, with: bytes)
            }
        case .copy(let file):
            if let bytes = disk.contents(atPath: "\(storePath)/\(file.rawValue)") {
                copies[file] = (bytes, scheduler.tick())
            }
        case .restore(let file, let inPlace):
            guard let copy = copies[file] else { return }
            if file == .data {
                stopEveryProcess()
                history.noteLoss(.restore(at: scheduler.tick(), copied: copy.at))
            } else if inPlace {
                history.allowStaleReads(by: processes.filter { !$0.isKilled }.map(\.id))
            }
            disk.replaceFile(in: storePath, named: file.rawValue, with: copy.bytes, inPlace: inPlace)
            if file == .data { restartEverySlot() }
        case .diskFull(let full):
            machine.faults.withLock { $0.diskFull = full }
        case .deny(let denied):
            machine.faults.withLock { $0.denied = denied }
        }
    }

    private func stopEveryProcess() {
        for process in processes where !process.isKilled { process.kill() }
    }

    private func restartEverySlot() {
        for slot in plan.operations.indices { startProcess(for: slot) }
    }
}

extension SimulatedDisk {
    /// Runs `body` with a descriptor of the directory at `path`, if there is one.
    func withDirectory(_ path: String, _ body: (Int32) -> Void) {
        guard case .success(let directory) = openDirectory(atPath: path) else { return }
        body(directory)
        _ = close(directory)
    }

    /// Puts `bytes` in the file `name` of the directory at `path`, as a copy tool would: in place
    /// (`cp`: truncated, then written) or as a new file renamed over the name (`rsync`); then
    /// flushes the file and the directory, as a careful one does (a restore a power loss can
    /// undo is not a restore the model can count on).
    func replaceFile(in path: String, named name: String, with bytes: [UInt8], inPlace: Bool) {
        withDirectory(path) { directory in
            let target = inPlace ? name : ".\(name).restoring"
            guard
                case .success(let fd) = open(
                    in: directory, target, flags: O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, mode: 0o600)
            else { return }
            if !bytes.isEmpty { _ = bytes.withUnsafeBytes { write(fd, from: $0, at: 0) } }
            _ = close(fd)
            if !inPlace { _ = rename(in: directory, target, to: name) }
        }
        makeDurable(atPath: "\(path)/\(name)")
        makeDurable(atPath: path)
    }
}

/// Records the changes a store's delivery hands its listener, in order: what the store announces
/// (value streams, then Observation and notifications get the same batches).
final class AnnouncementRecorder: EngineListener {
    let changes = Locked<[ChangeSet]>([])

    func engineDidChange(_ changes: [ChangeSet]) {
        self.changes.withLock { $0.append(contentsOf: changes) }
    }

    func engineDidAnnounce(_ changes: [ChangeSet]) {}
}
