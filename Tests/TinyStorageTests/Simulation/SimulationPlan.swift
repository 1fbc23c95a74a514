@testable import TinyStorage

/// What a simulated process does, one operation after another.
enum SimulatedOperation: Equatable, CustomStringConvertible {
    case set(String, Int)
    /// A set with a lifetime far longer than the run (its clock never moves): the value reads as
    /// a plain set does, and its record is a version 3 put, so the first one upgrades the file.
    case setExpiring(String, Int)
    case remove(String)
    case increment
    case read(String)
    case synchronize

    var description: String {
        switch self {
        case .set(let key, let value): "set \(key) = \(value)"
        case .setExpiring(let key, let value): "set \(key) = \(value), expiring"
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
                case 0..<22:
                    defer { nextValue += 1 }
                    return .set(own, slot * 1_000_000 + nextValue)
                case 22..<28:
                    defer { nextValue += 1 }
                    return .setExpiring(own, slot * 1_000_000 + nextValue)
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
