import Foundation
import Testing

@testable import TinyStorage

/// Issue 28, D2: on watchOS (arm64_32) an `Int` has 32 bits, and `Int(_:)` of a larger number
/// traps. Every length, count and end read from a file or from the lock page is checked before it
/// becomes an `Int`, so a damaged one is damage, never a crash; every new key is counted in 64
/// bits. This machine's `Int` has 64 bits, so the trap itself cannot happen here: the tests feed
/// numbers of 2³¹ and more, which must read as damage on both widths.
@Suite struct IntegerWidthTests {
    static let hugeLengths: [UInt32] = [0x8000_0000, 0xFFFF_FFFF, UInt32(LogFormat.maximumPayloadSize) + 1]

    /// A frame stating `length`, then a little of a payload.
    func frame(stating length: UInt32) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.appendLittleEndian(length)
        bytes.appendLittleEndian(UInt32(0))
        bytes += [2, 0, 1, 0, 0, 0, 0, 0, 0, 0]
        return bytes
    }

    @Test(arguments: hugeLengths)
    func aRecordStatingAHugeLengthIsDamage(length: UInt32) {
        let bytes = frame(stating: length)
        bytes.withUnsafeBytes { raw in
            let scanned = LogScanner.scan(raw, from: 0) { _ in Issue.record("applied a record") }
            #expect(scanned.end == 0)
            #expect(scanned.stop == .corrupt(offset: 0, reason: "an impossible record length \(length)"))
            #expect(LogScanner.nextVerifiableRecord(in: raw, after: -1) == nil)
            #expect(LogScanner.probableKeys(in: raw, range: 0..<raw.count).isEmpty)
        }
        #expect(LogFormat.framesEnd(of: LogHeader(generation: 1).encoded() + bytes) == LogFormat.headerSize)
    }

    /// Inside a record that verifies, a count or a key or value length of 2³¹ and more is a
    /// malformed record.
    @Test(arguments: hugeLengths)
    func aPayloadStatingAHugeCountOrLengthIsMalformed(length: UInt32) {
        var sequence: [UInt8] = []
        sequence.appendLittleEndian(UInt64(1))
        let payloads: [[UInt8]] = [
            [LogFormat.commitKind, 0] + sequence + littleEndian(length),
            [LogFormat.commitKind, 0] + sequence + littleEndian(UInt32(1)) + [LogFormat.putJSONTag]
                + littleEndian(length),
            [LogFormat.commitKind, 0] + sequence + littleEndian(UInt32(1)) + [LogFormat.putJSONTag]
                + littleEndian(UInt32(1)) + [0x6B] + littleEndian(length),
        ]
        for payload in payloads {
            LogScannerTests.framed(payload).withUnsafeBytes { raw in
                let scanned = LogScanner.scan(raw, from: 0) { _ in Issue.record("applied a record") }
                #expect(scanned.stop == .corrupt(offset: 0, reason: "a malformed record"))
            }
        }
    }

    /// A durable mark of 2⁶³ and more (a damaged header whose slot's checksum still holds) is no mark.
    @Test func aDurableMarkPastAnyIntIsNoMark() {
        var header = LogHeader(generation: 1).encoded()
        LogHeader.setDurableMark(100, in: &header)
        var slot: [UInt8] = []
        slot.appendLittleEndian(UInt64.max)
        slot.appendLittleEndian(slot.withUnsafeBytes { crc32c($0) })
        let secondSlot = LogHeader.durableSlotsOffset + LogHeader.durableSlotSize
        header.replaceSubrange(secondSlot..<LogFormat.headerSize, with: slot)
        header.withUnsafeBytes { raw in
            #expect(LogHeader.slotValue(in: raw, slot: 1) == nil)
            #expect(LogHeader.durableMark(in: raw) == 100)
        }
    }

    /// A lock page whose length says 2⁶³ and more (another program wrote over it) is a page ahead
    /// of the file: the store opens and reads what the file holds.
    @Test func aPageLengthPastAnyIntIsAPageAheadOfTheFile() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow(364, forKey: "streak")
            let page = try LockPage(in: directory)
            try page.write(UInt64.max, at: 16)
            try page.write(try page.value(at: 24) + 1, at: 24)
            #expect(try storage.retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
            #expect(try openStore(directory).retrieveOrThrow(type: Int.self, forKey: "streak") == 364)
            try storage.storeOrThrow(365, forKey: "streak")
            #expect(try openStore(directory).retrieveOrThrow(type: Int.self, forKey: "streak") == 365)
        }
    }

    func littleEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.appendLittleEndian(value)
        return bytes
    }
}
