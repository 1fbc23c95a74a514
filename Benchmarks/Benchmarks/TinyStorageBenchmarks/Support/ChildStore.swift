import Benchmark
import Dispatch
import Foundation
@_spi(Benchmarks) import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// This executable, started again as another process that opens the same store.
///
/// The role is passed in `TINYSTORAGE_BENCH_ROLE` (see ``runCrossProcessRoleIfRequested()``), so no
/// other binary has to be built or found. The other process exits when its standard input closes,
/// so it goes away with the benchmark.
final class ChildStore {
    enum Role {
        /// Stores 1, 2, 3… to ``writerKey`` while switched on, pausing this long after each
        /// commit (0: flat out).
        case writer(pauseMicroseconds: Int)
        /// Keeps the store open and does nothing with it.
        case idle
        /// Opens no store: while switched on (as a writer is), writes 8 bytes at the start of a
        /// file of its own in the store's scratch directory with `pwrite(2)`, flat out. A floor:
        /// a process as busy as a writer, with no store between it and the reader.
        case fileWriter
        /// Answers every `didChangeNotification` whose writeID is a ``CommitStamp`` with a line
        /// "<commit number> <nanoseconds since the stamp>", and one of "stamp" without a writeID
        /// with "unstamped".
        case listener
        /// For each line on standard input, makes the store compact itself, which replaces its
        /// data file.
        case compactor
        /// Runs the lock-hold workload on a store of this durability between "start" and "stop"
        /// (``runLockWorker(_:)``).
        case lockWorker(durability: TinyStorage.Durability)

        var environment: String {
            switch self {
            case .writer(let pause): "writer \(pause)"
            case .idle: "idle"
            case .fileWriter: "filewriter"
            case .listener: "listener"
            case .compactor: "compactor"
            case .lockWorker(let durability): "lockworker \(durability.label)"
            }
        }
    }

    static let roleVariable = "TINYSTORAGE_BENCH_ROLE"
    /// The key a writer commits to, one the measuring process never reads or writes.
    static let writerKey = "other-process-counter"
    static let directoryVariable = "TINYSTORAGE_BENCH_STORE_DIR"
    /// Set (to anything) in the benchmark's environment, makes the listener trace what it hears.
    static let traceVariable = "TINYSTORAGE_BENCH_TRACE"

    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    /// What the other process said when it was ready: "ready", then any remarks.
    let greeting: String

    /// Starts the other process and waits until it has opened the store.
    init(role: Role, directory: ScratchDirectory) throws {
        process.executableURL = Self.executable
        process.arguments = []
        var environment = ProcessInfo.processInfo.environment
        environment[Self.roleVariable] = role.environment
        environment[Self.directoryVariable] = directory.url.path
        process.environment = environment
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        let line = Self.readLine(output.fileHandleForReading.fileDescriptor)
        greeting = line ?? ""
        guard greeting.hasPrefix("ready") else {
            stop()
            throw ChildFailed(message: "the other process said '\(line ?? "<nothing>")' instead of 'ready'")
        }
    }

    struct ChildFailed: Error { var message: String }

    /// This benchmark executable.
    static var executable: URL {
        if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            return URL(fileURLWithPath: path)
        }
        return URL(fileURLWithPath: Bundle.main.executablePath ?? CommandLine.arguments[0])
    }

    /// The other process's standard output.
    var outputDescriptor: Int32 { output.fileHandleForReading.fileDescriptor }

    func send(_ line: String) {
        try? input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Tells a writer to stop or start committing, and waits until it has stopped, or until
    /// `storage` has seen it commit again.
    func setWriting(_ writing: Bool, observedBy storage: TinyStorage? = nil) {
        send(writing ? "on" : "off")
        _ = Self.readLine(outputDescriptor)
        guard writing, let storage else { return }
        let start = storage.integer(forKey: Self.writerKey)
        while storage.integer(forKey: Self.writerKey) == start { sched_yield() }
    }

    /// Closes the other process's standard input (it exits on end of file) and waits for it.
    func stop() {
        try? input.fileHandleForWriting.close()
        if process.isRunning { process.waitUntilExit() }
    }

    /// One line from `fd`, without the newline; `nil` at end of file.
    static func readLine(_ fd: Int32) -> String? {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while read(fd, &byte, 1) == 1 {
            if byte == 0x0A { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
        return nil
    }
}

/// When this executable was started as another process by ``ChildStore``, plays that role and
/// exits; otherwise returns at once. Call first thing in `benchmarks`.
func runCrossProcessRoleIfRequested() {
    let start = DispatchTime.now().uptimeNanoseconds
    let environment = ProcessInfo.processInfo.environment
    guard let role = environment[ChildStore.roleVariable], let path = environment[ChildStore.directoryVariable] else {
        return
    }
    if role == "coldopen" || role == "coldfloor" { runColdOpenRole(role, directory: path, start: start) }
    if role == "filewriter" { runFileWriter(directory: path) }
    let parts = role.split(separator: " ")
    let immediate = role == ChildStore.Role.lockWorker(durability: .immediate).environment
    let durability: TinyStorage.Durability = immediate ? .immediate : .standard
    let storage = TinyStorage(insideDirectory: URL(fileURLWithPath: path), name: "store", durability: durability)
    switch (parts.first, parts.count) {
    case ("writer", 2): runWriter(storage, pauseMicroseconds: UInt32(parts[1]) ?? 0)
    case ("idle", 1): runIdle(storage)
    case ("listener", 1): runListener(storage)
    case ("compactor", 1): runCompactor(storage)
    case ("lockworker", 2): runLockWorker(storage)
    default:
        tellParent("unknown role '\(role)'")
        exit(64)
    }
}

/// Writes `line` and a newline to standard output, the parent's pipe, in one `write(2)`.
@Sendable func tellParent(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
}

/// The writer role: "on" and "off" on standard input start and stop commits to ``writerKey``,
/// each answered "ok" once it holds. The end of standard input (the parent stops it, or exits)
/// ends the process.
// NB: swiftc 6.3.1 -O never finishes this function (the loop-invariant code motion pass spins in
// `optimizeTopLevelLoop`), so it is left unoptimized; its time is spent inside `store` anyway.
@_optimize(none)
private func runWriter(_ storage: TinyStorage, pauseMicroseconds pause: UInt32) -> Never {
    let writerSwitch = WriterSwitch.drivenByStandardInput()
    tellParent("ready")
    var next = storage.integer(forKey: ChildStore.writerKey)
    while true {
        writerSwitch.startCommit()
        next += 1
        storage.store(next, forKey: ChildStore.writerKey)
        writerSwitch.endCommit()
        if pause > 0 { usleep(pause) }
    }
}

/// The file writer role: as the writer role, "on" and "off" start and stop the writes, each
/// answered "ok"; the writes go to `pwrite-floor` in `directory`, no store is opened.
private func runFileWriter(directory: String) -> Never {
    let fd = open(directory + "/pwrite-floor", O_RDWR | O_CREAT, 0o644)
    guard fd >= 0 else {
        tellParent("cannot create the file: errno \(errno)")
        exit(1)
    }
    let writerSwitch = WriterSwitch.drivenByStandardInput()
    tellParent("ready")
    var next: UInt64 = 0
    while true {
        writerSwitch.startCommit()
        next += 1
        _ = withUnsafeBytes(of: &next) { pwrite(fd, $0.baseAddress, $0.count, 0) }
        writerSwitch.endCommit()
    }
}

extension WriterSwitch {
    /// A switch that "on" and "off" lines on standard input set, each answered "ok"; the end of
    /// standard input (the parent stops this process, or exits) ends the process.
    static func drivenByStandardInput() -> WriterSwitch {
        let writerSwitch = WriterSwitch()
        Thread.detachNewThread {
            while let line = readLine() {
                writerSwitch.set(line == "on")
                tellParent("ok")
            }
            exit(0)
        }
        return writerSwitch
    }
}

/// The idle role: the store stays open (its change monitor running) until standard input ends.
private func runIdle(_ storage: TinyStorage) -> Never {
    tellParent("ready")
    while readLine() != nil {}
    withExtendedLifetime(storage) { exit(0) }
}

/// The listener role. The store is opened without a `notificationQueue`, so it posts on the main
/// queue, its default; the observer is added with `queue: nil` and runs right there.
///
/// NB: this code runs inside the benchmark runner's `async` main, on a thread that then waits on
/// standard input. Whether the main queue still runs meanwhile decides whether a store that posts
/// on the main thread can be heard here at all, so the role checks it and says so in its "ready"
/// line ("main queue runs" / "main queue blocked").
private func runListener(_ storage: TinyStorage) -> Never {
    let observer = NotificationCenter.default.addObserver(
        forName: TinyStorage.didChangeNotification, object: storage, queue: nil
    ) { notification in
        let now = DispatchTime.now().uptimeNanoseconds
        guard let stamp = CommitStamp(writeID: notification.userInfo?[TinyStorage.writeIDUserInfoKey]) else {
            // A change announced without the writer's writeID (several commits merged into one
            // after a reload, say): it cannot be matched to a commit, but it is counted.
            let keys = notification.userInfo?[TinyStorage.changedKeysUserInfoKey] as? [String] ?? []
            if keys.contains("stamp") { tellParent("unstamped") }
            return
        }
        tellParent("\(stamp.number) \(now &- stamp.nanoseconds)")
    }
    if ProcessInfo.processInfo.environment[ChildStore.traceVariable] != nil { traceAnnouncements(of: storage) }
    let mainQueueRuns = DispatchSemaphore(value: 0)
    DispatchQueue.main.async { mainQueueRuns.signal() }
    let remark = mainQueueRuns.wait(timeout: .now() + 1) == .success ? "main queue runs" : "main queue blocked"
    tellParent("ready, \(remark)")
    while readLine() != nil {}
    NotificationCenter.default.removeObserver(observer)
    withExtendedLifetime(storage) { exit(0) }
}

/// With `TINYSTORAGE_BENCH_TRACE` set, the listener also writes to standard error, in order,
/// "trace: announced <commit number>" (or "unstamped") for each notification and "trace: value
/// <value>" for each value that `values(forKey: "stamp")` yields, so a run shows what was
/// announced around a notification without writeID.
private func traceAnnouncements(of storage: TinyStorage) {
    let trace: @Sendable (String) -> Void = { line in FileHandle.standardError.write(Data("trace: \(line)\n".utf8)) }
    _ = NotificationCenter.default.addObserver(
        forName: TinyStorage.didChangeNotification, object: storage, queue: nil
    ) { notification in
        let stamp = CommitStamp(writeID: notification.userInfo?[TinyStorage.writeIDUserInfoKey])
        trace("announced \(stamp.map { String($0.number) } ?? "unstamped")")
    }
    Task.detached {
        for await value in storage.values(forKey: "stamp", as: Int.self) {
            trace("value \(value.map { String($0) } ?? "nil")")
        }
    }
}

/// The compactor role: each line on standard input makes this process compact the store
/// (`_compactNow()`, the benchmark hook), which replaces its data file.
private func runCompactor(_ storage: TinyStorage) -> Never {
    tellParent("ready")
    while readLine() != nil {
        do {
            try storage._compactNow()
        } catch {
            FileHandle.standardError.write(Data("compactor: compaction failed: \(error)\n".utf8))
        }
    }
    exit(0)
}

/// Which commit a writeID belongs to and when it started (`DispatchTime` nanoseconds, the same
/// clock in every process), so a listener in another process can tell which commit a notification
/// announces and how long it took.
struct CommitStamp: Equatable {
    var number: Int
    var nanoseconds: UInt64

    /// Reads a stamp from a notification's writeID, a `UUID` today or a `String` (the 2.x type).
    init?(writeID: Any?) {
        if let uuid = writeID as? UUID {
            let words = withUnsafeBytes(of: uuid.uuid) { bytes in
                (
                    bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self),
                    bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
                )
            }
            number = Int(truncatingIfNeeded: UInt64(bigEndian: words.0))
            nanoseconds = UInt64(bigEndian: words.1)
        } else if let string = writeID as? String {
            let parts = string.split(separator: " ")
            guard parts.count == 3, parts[0] == "commit", let number = Int(parts[1]),
                let nanoseconds = UInt64(parts[2])
            else { return nil }
            self.number = number
            self.nanoseconds = nanoseconds
        } else {
            return nil
        }
    }

    init(number: Int, nanoseconds: UInt64) {
        self.number = number
        self.nanoseconds = nanoseconds
    }
}

// NB: both spellings exist so `store(_:forKey:writeID: .init(commitStamp:))` compiles whether
// `writeID` is `UUID?` (today) or `String?` (the 2.x drop-in type).
extension UUID {
    init(commitStamp stamp: CommitStamp) {
        var raw: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &raw) { bytes in
            bytes.storeBytes(of: UInt64(stamp.number).bigEndian, toByteOffset: 0, as: UInt64.self)
            bytes.storeBytes(of: stamp.nanoseconds.bigEndian, toByteOffset: 8, as: UInt64.self)
        }
        self.init(uuid: raw)
    }
}

extension String {
    init(commitStamp stamp: CommitStamp) { self = "commit \(stamp.number) \(stamp.nanoseconds)" }
}

/// Starts and stops the writer role's commits from another thread.
final class WriterSwitch: @unchecked Sendable {
    // @unchecked: `isOn` and `isCommitting` are only touched while holding `condition`.
    private let condition = NSCondition()
    private var isOn = false
    private var isCommitting = false

    /// Switches commits on or off; returns once no commit is under way after switching off.
    func set(_ on: Bool) {
        condition.lock()
        defer { condition.unlock() }
        isOn = on
        condition.broadcast()
        while !on && isCommitting { condition.wait() }
    }

    /// Waits until commits are on, then marks one as under way.
    func startCommit() {
        condition.lock()
        defer { condition.unlock() }
        while !isOn { condition.wait() }
        isCommitting = true
    }

    func endCommit() {
        condition.lock()
        defer { condition.unlock() }
        isCommitting = false
        condition.broadcast()
    }
}
