import Benchmark
import Foundation
import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// (c) Issue 32's cold open: a widget or an extension is a new process, whose first read pays
/// whatever a store does once per process (queues, threads, the lock file, the mapping) as well as
/// the open. Each iteration starts this executable twice, in turns, as a process of its own:
/// once to open the 1,000-profile store of ``registerColdOpenBenchmarks()`` and read one profile
/// (decoded), once for the floor, reading the same profile's JSON from a file of its own with
/// `Data(contentsOf:)` and decoding it with `JSONDecoder`. Each child times itself from the first
/// line of its role (before anything of TinyStorage or the file is touched) to the value in hand,
/// and reports it: the process's own start, the same for both, is not measured.
func registerColdOpenInAFreshProcessBenchmarks() {
    final class State {
        let directory = ScratchDirectory("cold-process")
        init() throws {
            TinyStorage.open(directory, name: "store").prefill(profiles: 1_000)
            try JSON.encode(Profile.sample(500)).write(to: directory.url.appendingPathComponent(freshProcessFloorFile))
        }
    }
    let paired = PairedMetrics("TinyStorage", beside: "read a file")
    register(
        "c cold open in a new process: TinyStorage beside a file",
        .init(
            metrics: paired.all, warmupIterations: 1, scalingFactor: .one, maxDuration: .seconds(10),
            maxIterations: 100),
        setUp: { try State() }, tearDown: { $0.directory.remove() }
    ) { benchmark, state in
        var totals: (first: UInt64, second: UInt64) = (0, 0)
        for storeFirst in [true, false] {
            for role in storeFirst ? ["coldopen", "coldfloor"] : ["coldfloor", "coldopen"] {
                let nanoseconds = try runColdOpenChild(role: role, directory: state.directory)
                if role == "coldopen" { totals.first += nanoseconds } else { totals.second += nanoseconds }
            }
        }
        paired.record(totals, operations: 2, in: benchmark)
    }
}

/// The floor's file, in the store's scratch directory: one profile's JSON.
let freshProcessFloorFile = "floor.json"

/// Starts this executable as a process playing `role` and returns the nanoseconds it reported.
private func runColdOpenChild(role: String, directory: ScratchDirectory) throws -> UInt64 {
    let process = Process()
    let output = Pipe()
    process.executableURL = ChildStore.executable
    process.arguments = []
    var environment = ProcessInfo.processInfo.environment
    environment[ChildStore.roleVariable] = role
    environment[ChildStore.directoryVariable] = directory.url.path
    process.environment = environment
    process.standardOutput = output
    try process.run()
    let line = ChildStore.readLine(output.fileHandleForReading.fileDescriptor)
    process.waitUntilExit()
    guard let line, let nanoseconds = UInt64(line) else {
        throw ChildStore.ChildFailed(message: "the \(role) process said '\(line ?? "<nothing>")'")
    }
    return nanoseconds
}

/// The two roles of ``registerColdOpenInAFreshProcessBenchmarks()``: reports the nanoseconds from
/// `start` to the profile in hand, and exits.
func runColdOpenRole(_ role: String, directory: String, start: UInt64) -> Never {
    let url = URL(fileURLWithPath: directory)
    let profile: Profile?
    if role == "coldopen" {
        let storage = TinyStorage(insideDirectory: url, name: "store")
        profile = storage.retrieve(type: Profile.self, forKey: Keys.key(500))
    } else {
        let data = try? Data(contentsOf: url.appendingPathComponent(freshProcessFloorFile))
        profile = data.flatMap { try? JSONDecoder().decode(Profile.self, from: $0) }
    }
    let elapsed = DispatchTime.now().uptimeNanoseconds - start
    tellParent(profile == nil ? "no profile" : "\(elapsed)")
    exit(0)
}
