import CTinyStorageShims
import Foundation
import Testing

@testable import TinyStorage

/// CRC-32C (Castagnoli): known vectors, and the hardware and table paths agree.
@Suite struct ChecksumTests {
    func crc(_ bytes: [UInt8], startingWith start: UInt32 = 0) -> UInt32 {
        bytes.withUnsafeBytes { crc32c($0, startingWith: start) }
    }

    @Test(arguments: [
        ("", 0x0000_0000 as UInt32),
        ("a", 0xC1D0_4330),
        ("123456789", 0xE306_9283),
        ("The quick brown fox jumps over the lazy dog", 0x2262_0404),
    ])
    func knownVectors(text: String, expected: UInt32) {
        #expect(crc(Array(text.utf8)) == expected)
        #expect(Array(text.utf8).withUnsafeBytes { ts_crc32c_portable(0, $0.baseAddress, $0.count) } == expected)
    }

    @Test func rfc3720TestVectors() {
        // iSCSI (RFC 3720 B.4): 32 bytes of zeros, of 0xFF, ascending and descending.
        #expect(crc([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(crc([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(crc((0..<32).map { UInt8($0) }) == 0x46DD_794E)
        #expect(crc((0..<32).reversed().map { UInt8($0) }) == 0x113F_DB5C)
    }

    @Test func checksummingInPiecesEqualsChecksummingAtOnce() {
        let bytes = Array("123456789 and then some more bytes".utf8)
        for split in 0...bytes.count {
            let first = crc(Array(bytes[..<split]))
            #expect(crc(Array(bytes[split...]), startingWith: first) == crc(bytes), "split at \(split)")
        }
    }

    @Test func hardwareAndPortableImplementationsAgreeOnRandomBuffers() {
        let seed = SeededGenerator.makeSeed()
        var generator = SeededGenerator(seed: seed)
        for _ in 0..<300 {
            let count = Int.random(in: 0...4_100, using: &generator)
            let offset = Int.random(in: 0...15, using: &generator)  // misaligned starts
            let start = UInt32.random(in: 0...UInt32.max, using: &generator)
            let bytes = [UInt8](Data.random(count: count + offset, using: &generator))
            bytes.withUnsafeBytes { raw in
                let slice = UnsafeRawBufferPointer(rebasing: raw[offset...])
                let fast = ts_crc32c(start, slice.baseAddress, slice.count)
                let portable = ts_crc32c_portable(start, slice.baseAddress, slice.count)
                #expect(fast == portable, "seed \(seed): \(slice.count) bytes at offset \(offset)")
            }
        }
    }
}
