import Foundation

@testable import TinyStorage

/// Where crash tests keep their store on a simulated disk, and how they open it.
enum SimulatedStore {
    /// The app's container: settled on the disk before the store is first opened.
    static let containerPath = "/sim/app"
    static let directoryPath = "/sim/app/store"
    static let dataPath = "/sim/app/store/store.tinystorage"
    static let plistPath = "/sim/app/store/tiny-storage.plist"
    static let quarantinePath = "/sim/app/store/quarantine"

    /// The store `store` inside `/sim/app` on `disk`, deterministic, with no watcher threads.
    /// Its background flushes wait in `flushes` until the test runs them; without `flushes` there
    /// are none (tests call `synchronize()` where they would come). Compaction runs inside the
    /// commit that calls for it, so a crash can be armed at any of its steps.
    static func open(
        on disk: SimulatedDisk, durability: TinyStorage.Durability, logger: TestLogger = TestLogger(),
        flushes: ManualFlushes? = nil, clock: ManualClock? = nil
    ) -> TinyStorage {
        var options = Engine.Options(
            backgroundFlushes: flushes != nil, watchesChanges: false, compactsInBackground: false)
        if let flushes { options.flushScheduler = flushes.scheduler }
        if let clock { options.clock = clock.expiryClock }
        return TinyStorage(
            insideDirectory: URL(fileURLWithPath: containerPath, isDirectory: true), name: "store",
            durability: durability, io: disk.io, logger: logger, options: options)
    }

    /// A disk whose container exists and is durable.
    static func makeDisk(boot: UInt64 = 1, fileSystemType: Int64 = AppendMapping.tmpfs) -> SimulatedDisk {
        let disk = SimulatedDisk(boot: BootIdentity(high: boot, low: boot), fileSystemType: fileSystemType)
        disk.makeSettledDirectories(atPath: containerPath)
        return disk
    }

    /// Whether `bytes` are a whole data file: a header that verifies and records that verify to
    /// the end (zeros after them allowed), with nothing torn or damaged.
    static func isCompleteDataFile(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { raw in
            guard case .success(let header) = LogHeader.decode(raw) else { return false }
            return LogScanner.scan(raw, from: header.size, version: header.version) { _ in }.stop == .end
        }
    }

    /// Whether `error` says the store is damaged (a `.corrupted` error, or unavailable because
    /// of one), as opposed to a failure of the disk or of the call.
    static func reportsDamage(_ error: TinyStorageError) -> Bool {
        if error.code == .corrupted { return true }
        if error.code == .unavailable, let cause = error.underlying as? TinyStorageError {
            return reportsDamage(cause)
        }
        return false
    }
}

/// Background flushes that run when a test says so, in the order they were scheduled.
final class ManualFlushes: Sendable {
    private let pending = Locked<[@Sendable () -> Void]>([])

    var scheduler: BackgroundScheduler {
        BackgroundScheduler { [pending] flush in pending.withLock { $0.append(flush) } }
    }

    var count: Int { pending.withLock { $0.count } }

    /// Runs every pending flush, and those they schedule, in order. Returns how many ran.
    @discardableResult
    func runAll() -> Int {
        var ran = 0
        while let next = pending.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
            next()
            ran += 1
        }
        return ran
    }

    /// A crash: the process that scheduled them is gone.
    func discardAll() { pending.withLock { $0.removeAll() } }
}
