import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A `tinystorage` process that runs until told to stop, such as `watch`, with its output read
/// as it comes.
///
/// Every wait is bounded by a deadline that only guards against a hang: waits return as soon as
/// what they wait for happens, and nothing sleeps.
final class CLIProcess {
    enum Stream { case stdout, stderr }

    /// How long a wait may take before the test fails instead of hanging.
    static let deadline: Duration = .seconds(30)

    private let process = Process()
    private let outPipe = Pipe()
    private let errPipe = Pipe()
    private let exited = DispatchSemaphore(value: 0)
    private var outData = Data()
    private var errData = Data()

    /// What the process printed so far.
    var stdout: String { String(decoding: outData, as: UTF8.self) }
    var stderr: String { String(decoding: errData, as: UTF8.self) }

    init(_ executable: URL, _ arguments: [String], in directory: URL) throws {
        process.executableURL = executable
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.standardOutput = outPipe
        process.standardError = errPipe
        process.standardInput = FileHandle.nullDevice
        process.terminationHandler = { [exited] _ in exited.signal() }
        try process.run()
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    /// Reads output until `text` has appeared on `stream`; `false` when the deadline passed or
    /// the process closed its output first.
    func waitFor(_ text: String, on stream: Stream = .stdout) -> Bool {
        let end = ContinuousClock.now + Self.deadline
        while !(stream == .stdout ? stdout : stderr).contains(text) {
            let remaining = end - ContinuousClock.now
            guard remaining > .zero, readAvailable(timeout: remaining) else { return false }
        }
        return true
    }

    /// Sends `signal` (SIGINT, as Ctrl-C does, by default).
    func send(_ signal: Int32 = SIGINT) {
        kill(process.processIdentifier, signal)
    }

    /// Waits for the process to exit and returns its exit code, or `nil` when it did not exit
    /// before the deadline (it is then killed) or was killed by a signal.
    func waitForExit() -> Int32? {
        let seconds = Double(Self.deadline.components.seconds)
        guard exited.wait(timeout: .now() + seconds) == .success else {
            kill(process.processIdentifier, SIGKILL)
            return nil
        }
        while readAvailable(timeout: .zero) {}
        return process.terminationReason == .exit ? process.terminationStatus : nil
    }

    /// Waits up to `timeout` for output on either pipe and appends what is there. `false` when
    /// nothing came in time or both pipes are closed.
    private func readAvailable(timeout: Duration) -> Bool {
        let descriptors = [outPipe.fileHandleForReading.fileDescriptor, errPipe.fileHandleForReading.fileDescriptor]
        var polled = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        let (seconds, attoseconds) = timeout.components
        let milliseconds = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        guard poll(&polled, nfds_t(polled.count), milliseconds) > 0 else { return false }
        var gotData = false
        for (index, entry) in polled.enumerated() where entry.revents != 0 {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = read(entry.fd, &buffer, buffer.count)
            guard count > 0 else { continue }
            gotData = true
            if index == 0 {
                outData.append(contentsOf: buffer[..<count])
            } else {
                errData.append(contentsOf: buffer[..<count])
            }
        }
        return gotData
    }
}
