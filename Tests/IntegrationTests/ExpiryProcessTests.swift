import Foundation
import Testing
import TinyStorage

/// Values that expire, across real processes (issue 33, item 3): another process reads a value
/// until its deadline and `nil` from it, whoever removes it from the file later, and hears of the
/// expiry through its own wake. Real processes share no fake clock: the short lifetimes here are
/// waited for by asking the other process until it answers `nil` (or prints the change), with a
/// watchdog that only turns a hang into a failure. Nothing asserts how long anything took.
@Suite struct ExpiryProcessTests {
    @Test func anExpiredValueReadsNilInAnotherProcessAndStaysGoneAfterACompaction() throws {
        try withTemporaryDirectory { directory throws in
            let watchdog = Watchdog()
            defer { watchdog.cancel() }
            let storage = openStore(directory)
            try storage.storeOrThrow(0, forKey: "plain")
            let reader = watchdog.guarding(
                try HelperProcess(["read-on-request", directory.path, "store"], withInput: true))
            #expect(reader.readLine() == "ready", "\(reader.errorOutput)")
            func read(_ key: String) throws -> String? {
                try reader.send(key)
                return reader.readLine()
            }

            try storage.storeOrThrow(7, forKey: "long", expiresAfter: .seconds(3600))
            try storage.storeOrThrow(8, forKey: "short", expiresAfter: .milliseconds(300))
            try storage.storeOrThrow(9, forKey: "plain")
            #expect(try read("long") == "value long 7", "\(reader.errorOutput)")
            #expect(try read("plain") == "value plain 9")

            // NB: polls the other process until it reads `nil`; the pause between questions only
            // spares the processor, and the watchdog ends a run that never gets there.
            var answer = try read("short")
            while answer == "value short 8", !watchdog.fired {
                usleep(20_000)
                answer = try read("short")
            }
            #expect(answer == "value short nil", "\(reader.errorOutput)")
            #expect(storage.retrieve(type: Int.self, forKey: "short") == nil, "nor does this process read it")
            #expect(!storage.contains("short"))

            try storage.compactNow()
            #expect(try read("short") == "value short nil", "after the compaction that removed it")
            #expect(try read("long") == "value long 7", "and the other value kept its deadline")
            let dump = try Helper.run(["dump", directory.path, "store"])
            #expect(dump.status == 0, "\(dump.errors)")
            #expect(dump.output == [#"{"key":"long","value":7}"#, #"{"key":"plain","value":9}"#])
            #expect(!watchdog.fired)
        }
    }

    @Test func anotherProcessAnnouncesTheExpiryItselfOnce() throws {
        try withTemporaryDirectory { directory throws in
            let watchdog = Watchdog()
            defer { watchdog.cancel() }
            let storage = openStore(directory)
            try storage.storeOrThrow(0, forKey: "plain")
            let observer = watchdog.guarding(try HelperProcess(["observe", directory.path, "store"], withInput: true))
            #expect(observer.readLine() == "ready", "\(observer.errorOutput)")

            try storage.storeOrThrow("code", forKey: "short", writeID: "sent", expiresAfter: .milliseconds(300))
            #expect(observer.readLine() == changeLine(keys: ["short"], writeID: "sent"), "\(observer.errorOutput)")
            // The observer's own wake, at the deadline: a change without writeID.
            #expect(observer.readLine() == changeLine(keys: ["short"], writeID: nil), "\(observer.errorOutput)")
            // Nothing more about it: the next line is the next commit's.
            try storage.storeOrThrow(1, forKey: "plain", writeID: "next")
            #expect(observer.readLine() == changeLine(keys: ["plain"], writeID: "next"), "\(observer.errorOutput)")
            #expect(!watchdog.fired)
        }
    }
}
