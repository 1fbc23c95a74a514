import Foundation

@testable import TinyStorage

/// One run of a plan: the processes, the disk they share, the faults, and the history checked
/// against the model. Returns the violations found.
final class SimulationRun: @unchecked Sendable {
    // @unchecked: touched only by the simulated thread holding the turn (the faults run on it,
    // before the scheduler's choice), or by the driver while no simulated thread runs.
    static let container = URL(fileURLWithPath: SimulatedStore.containerPath, isDirectory: true)
    /// The wall clock every simulated store reads: it never moves, so nothing stored expires.
    static let clock = ManualClock()

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
        // NB: a clock that never moves and never wakes anyone: no thread outside the schedule.
        options.clock = Self.clock.expiryClock
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
        case .setExpiring(let key, let value):
            write(value, to: key) {
                try store.storeOrThrow(value, forKey: key, writeID: writeID, expiresAfter: .seconds(86_400))
            }
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
