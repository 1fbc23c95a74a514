import Foundation
import Testing

@testable import TinyStorage

/// The fault seam's `.interrupt` must make a shim take its `EINTR` path: the call is interrupted
/// once and retried. If the injected interrupt does nothing (the real call simply runs once), every
/// "EINTR everywhere" test passes whether or not the shims retry, and a shim that returned `EINTR`
/// as a failure would go unnoticed.
///
/// Observable contract used here: the retry goes through the seam again, so a call interrupted
/// once consults the injector twice.
@Suite struct InterruptInjectionTests {
    /// A `FileIO` that interrupts the first consultation for each call and counts them all.
    final class InterruptOnce: Sendable {
        let consultations = Locked<[FileIO.Call: Int]>([:])

        var io: FileIO {
            FileIO { [self] call, _ in
                let count = consultations.withLock { counts -> Int in
                    counts[call, default: 0] += 1
                    return counts[call] ?? 0
                }
                return count == 1 ? .interrupt : nil
            }
        }

        func count(_ call: FileIO.Call) -> Int { consultations.withLock { $0[call] ?? 0 } }
    }

    @Test func anInjectedInterruptIsRetried() throws {
        try withTemporaryDirectory { directory throws in
            let seam = InterruptOnce()
            let io = seam.io

            let folder = try io.openDirectory(atPath: directory.path).get()
            defer { io.close(folder.fd) }
            let fd = try io.open(in: folder, "file", flags: O_RDWR | O_CREAT, mode: 0o600).get()
            defer { io.close(fd) }
            try [UInt8]("retried".utf8).withUnsafeBytes { try io.write(fd, $0, at: 0).get() }
            #expect(try io.read(fd, count: 7, at: 0).get() == Array("retried".utf8))
            _ = try io.status(in: folder, "file").get()

            for call in [FileIO.Call.open, .write, .read, .stat] {
                #expect(seam.count(call) >= 2, "an interrupted \(call) was not retried through the seam")
            }
        }
    }
}
