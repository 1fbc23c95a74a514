import Benchmark
import Dispatch
import Foundation
import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// (g) Several processes on one store (issue 3): a cached read while another process writes to the
/// store, a commit while another process writes, and the time from a commit in another process
/// to `didChangeNotification` here.
///
/// The other process is this benchmark executable again, started with `TINYSTORAGE_BENCH_ROLE`
/// set (see ``runCrossProcessRoleIfRequested()``): no other binary has to be built or found.
func registerCrossProcessBenchmarks() {
    registerReadsBesideWriter(label: "1,000/s", pauseMicroseconds: 1_000)
    registerReadsBesideWriter(label: "flat out", pauseMicroseconds: 0)

    final class OverwriteState {
        let directory = ScratchDirectory("cross-overwrite")
        let storage: TinyStorage
        let other: ChildStore?
        var next = 0
        init(writer: ChildStore.Role?) throws {
            storage = .open(directory)
            storage.prefill(profiles: 1_000)
            storage.store(0, forKey: Keys.counter)
            let directory = directory
            other = try writer.map { try ChildStore(role: $0, directory: directory) }
            other?.setWriting(true, observedBy: storage)
        }
    }
    let writers: [(label: String, role: ChildStore.Role?)] = [
        ("single process", nil),
        ("another process writing 1,000/s", .writer(pauseMicroseconds: 1_000)),
        ("another process writing flat out", .writer(pauseMicroseconds: 0)),
    ]
    for (label, writer) in writers {
        register(
            "g overwrite Int: TinyStorage, \(label)", .perOperation(),
            setUp: { try OverwriteState(writer: writer) },
            tearDown: {
                $0.other?.stop()
                $0.directory.remove()
            }
        ) { benchmark, state in
            for _ in benchmark.scaledIterations {
                state.next += 1
                state.storage.store(state.next, forKey: Keys.counter)
            }
        }
    }

    registerNotificationLatency()
}

/// Nanoseconds per cached read, 1,000 reads of random keys in a 1,000-Int store, as in
/// `b read Int: TinyStorage`: with the other process idle, with it writing, and the second as a
/// percentage of the first.
let readIdle = BenchmarkMetric.custom("read, other process idle (ns)", useScalingFactor: false)
let readWriting = BenchmarkMetric.custom("read, other process writing (ns)", useScalingFactor: false)
let readRatio = BenchmarkMetric.custom("writing / idle (%)", useScalingFactor: false)

/// Cached reads while another process, which has the same store open, either waits or commits to
/// another key of it. Each iteration measures both, one after the other, so the two figures are
/// taken side by side and machine noise hits them alike.
private func registerReadsBesideWriter(label: String, pauseMicroseconds: Int) {
    final class State {
        let read: TinyReadState
        let other: ChildStore
        init(pauseMicroseconds: Int) throws {
            read = TinyReadState(
                label: "cross",
                values: Dictionary(uniqueKeysWithValues: (0..<1_000).map { (Keys.key($0), $0 as any Encodable) }))
            read.warm(Int.self)
            other = try ChildStore(role: .writer(pauseMicroseconds: pauseMicroseconds), directory: read.directory)
        }

        /// Nanoseconds per read, over 1,000 reads.
        func timeReads() -> Int {
            let storage = read.storage
            let start = DispatchTime.now().uptimeNanoseconds
            for _ in 0..<1_000 { blackHole(storage.retrieve(type: Int.self, forKey: read.keys.next())) }
            return Int(DispatchTime.now().uptimeNanoseconds - start) / 1_000
        }
    }
    register(
        "g read Int: TinyStorage, another process idle vs writing \(label)",
        .init(
            metrics: [readIdle, readWriting, readRatio], warmupIterations: 10, scalingFactor: .one,
            maxDuration: .seconds(10), maxIterations: 2_000),
        setUp: { try State(pauseMicroseconds: pauseMicroseconds) },
        tearDown: {
            $0.other.stop()
            $0.read.directory.remove()
        }
    ) { benchmark, state in
        state.other.setWriting(false)
        let idle = state.timeReads()
        state.other.setWriting(true, observedBy: state.read.storage)
        let writing = state.timeReads()
        benchmark.measurement(readIdle, idle)
        benchmark.measurement(readWriting, writing)
        benchmark.measurement(readRatio, writing * 100 / max(idle, 1))
    }
}

/// The metric for ``registerNotificationLatency()``: from just before another process's
/// `store(_:forKey:)` to the start of this process's notification observer, in microseconds.
let notificationLatency = BenchmarkMetric.custom("notification latency (µs)", useScalingFactor: false)
/// 1 for an iteration whose notification did not come within a second, else 0: any p100 of 1 is a
/// G6 failure.
let missedNotifications = BenchmarkMetric.custom("missed notification (0/1)", useScalingFactor: false)

/// One iteration: asks the other process to commit its monotonic clock reading (nanoseconds)
/// to "stamp", and waits for the notification here. Each latency sample is the observer's clock
/// reading minus the stamp; the wall clock is the whole round trip, pipe and wake-ups included.
private func registerNotificationLatency() {
    final class State: @unchecked Sendable {
        // @unchecked: `latency` is only touched while holding `lock`; the rest is set in init.
        let directory = ScratchDirectory("cross-latency")
        let storage: TinyStorage
        let other: ChildStore
        let arrived = DispatchSemaphore(value: 0)
        private let lock = NSLock()
        private var latency = 0
        private var observer: (any NSObjectProtocol)?

        init() throws {
            storage = .open(directory)
            storage.store(0, forKey: "stamp")
            other = try ChildStore(role: .stamper, directory: directory)
            observer = NotificationCenter.default.addObserver(
                forName: TinyStorage.didChangeNotification, object: storage, queue: nil
            ) { [self] notification in
                let now = DispatchTime.now().uptimeNanoseconds
                guard let keys = notification.userInfo?[TinyStorage.changedKeysUserInfoKey] as? [String],
                    keys.contains("stamp"), let stamp = storage.retrieve(type: UInt64.self, forKey: "stamp")
                else { return }
                lock.withLock { latency = Int(now &- stamp) }
                arrived.signal()
            }
        }

        func stop() {
            if let observer { NotificationCenter.default.removeObserver(observer) }
            other.stop()
            directory.remove()
        }

        var lastLatency: Int { lock.withLock { latency } }
    }
    register(
        "g notification latency: commit in another process",
        .init(
            metrics: [.wallClock, notificationLatency, missedNotifications], warmupIterations: 5,
            scalingFactor: .one, maxDuration: .seconds(20), maxIterations: 2_000),
        setUp: State.init, tearDown: { $0.stop() }
    ) { benchmark, state in
        state.other.send("commit")
        var missed = 0
        // NB: G6 promises 50 ms. A notification that has not come after a second never comes by
        // itself (nothing else happens here): count it as missed, then read the store, which
        // catches up and announces the commit, so the sample shows how late it was.
        if state.arrived.wait(timeout: .now() + 1) == .timedOut {
            missed = 1
            blackHole(state.storage.retrieve(type: UInt64.self, forKey: "stamp"))
            guard state.arrived.wait(timeout: .now() + 5) == .success else {
                return benchmark.error("no notification even after reading the store")
            }
        }
        benchmark.measurement(notificationLatency, state.lastLatency / 1_000)
        benchmark.measurement(missedNotifications, missed)
    }
}

// MARK: The other process

/// This executable, started again as another process that opens the same store.
final class ChildStore {
    enum Role {
        /// Stores 1, 2, 3… to ``writerKey`` while switched on, pausing this long after each
        /// commit (0: flat out).
        case writer(pauseMicroseconds: Int)
        /// For each line on standard input, stores its monotonic clock reading to "stamp".
        case stamper

        var environment: String {
            switch self {
            case .writer(let pause): "writer \(pause)"
            case .stamper: "stamper"
            }
        }
    }

    static let roleVariable = "TINYSTORAGE_BENCH_ROLE"
    /// The key a writer commits to, one the measuring process never reads or writes.
    static let writerKey = "other-process-counter"
    static let directoryVariable = "TINYSTORAGE_BENCH_STORE_DIR"

    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()

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
        guard line == "ready" else {
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

    func send(_ line: String) {
        try? input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Tells a writer to stop or start committing, and waits until it has stopped, or until
    /// `storage` has seen it commit again.
    func setWriting(_ writing: Bool, observedBy storage: TinyStorage? = nil) {
        send(writing ? "on" : "off")
        _ = Self.readLine(output.fileHandleForReading.fileDescriptor)
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
    let environment = ProcessInfo.processInfo.environment
    guard let role = environment[ChildStore.roleVariable], let path = environment[ChildStore.directoryVariable] else {
        return
    }
    let storage = TinyStorage(insideDirectory: URL(fileURLWithPath: path), name: "store")
    let parts = role.split(separator: " ")
    switch (parts.first, parts.count) {
    case ("writer", 2): runWriter(storage, pauseMicroseconds: UInt32(parts[1]) ?? 0)
    case ("stamper", 1): runStamper(storage)
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
    let writerSwitch = WriterSwitch()
    Thread.detachNewThread {
        while let line = readLine() {
            writerSwitch.set(line == "on")
            tellParent("ok")
        }
        exit(0)
    }
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

/// The stamper role: for each line on standard input, stores the monotonic clock to "stamp".
@inline(never)
private func runStamper(_ storage: TinyStorage) -> Never {
    tellParent("ready")
    while readLine() != nil {
        storage.store(DispatchTime.now().uptimeNanoseconds, forKey: "stamp")
    }
    exit(0)
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
