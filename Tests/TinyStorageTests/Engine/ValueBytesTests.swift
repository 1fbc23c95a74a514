import Foundation
import Testing

@testable import TinyStorage

/// `ValueBytes` holds the same bytes however it was made, and compares and converts by them.
@Suite struct ValueBytesTests {
    /// Every length around the inline limit, and a few large ones.
    static let lengths = Array(0...40) + [100, 1_000, 70_000]

    /// `count` bytes that differ from one position to the next.
    static func pattern(_ count: Int, seed: UInt8 = 11) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37) &+ seed }
    }

    /// The same bytes made every way a `ValueBytes` can be made.
    static func everyWay(_ bytes: [UInt8]) -> [ValueBytes] {
        [
            bytes.withUnsafeBytes { ValueBytes(copying: $0) },
            ValueBytes(bytes),
            ValueBytes(Data(bytes)),
            ValueBytes(count: bytes.count) { raw in raw.copyBytes(from: bytes) },
        ]
    }

    @Test(arguments: lengths)
    func roundTripsEveryWay(length: Int) {
        let bytes = Self.pattern(length)
        let values = Self.everyWay(bytes)
        let kept: ValueBytes.Representation = length <= ValueBytes.inlineCapacity ? .inline : .heap
        #expect(values.map(\.representation) == [kept, kept, .data, kept])
        for value in values {
            #expect(value.count == length)
            #expect(value.isEmpty == (length == 0))
            #expect(value.withUnsafeBytes { Array($0) } == bytes)
            #expect(value.data == Data(bytes))
            #expect(value.detached().representation == kept)
            #expect(value.detached() == value)
        }
    }

    @Test(arguments: lengths)
    func equalAcrossRepresentations(length: Int) {
        let values = Self.everyWay(Self.pattern(length))
        for first in values {
            for second in values {
                #expect(first == second)
                #expect(first.hashValue == second.hashValue)
            }
        }
    }

    @Test(arguments: lengths.filter { $0 > 0 })
    func differentBytesAreNotEqual(length: Int) {
        var changed = Self.pattern(length)
        changed[length - 1] &+= 1
        let shorter = Array(Self.pattern(length).dropLast())
        for value in Self.everyWay(Self.pattern(length)) {
            for other in Self.everyWay(changed) + Self.everyWay(shorter) {
                #expect(value != other)
            }
        }
    }

    @Test func zeroBytesAreNotNothing() {
        #expect(ValueBytes() == ValueBytes([]))
        #expect(ValueBytes() != ValueBytes([0]))
        #expect(ValueBytes([0]) != ValueBytes([0, 0]))
        #expect(ValueBytes(Data([0, 0])) == ValueBytes([0, 0]))
    }

    @Test func aDataSliceIsReadWhereItStarts() {
        let buffer = Data(Self.pattern(64))
        let slice = buffer[20..<50]
        let value = ValueBytes(slice)
        #expect(value.count == 30)
        #expect(value.withUnsafeBytes { Array($0) } == Array(slice))
        #expect(value == ValueBytes(Array(slice)))
        #expect(value.data == slice)
        let detached = value.detached()
        #expect(detached.representation == .heap)
        #expect(detached.data.startIndex == 0)
        #expect(detached == value)
    }

    @Test func storedValueKeepsItsDataAccessor() {
        var stored = StoredValue(Data("\"hello, world and more\"".utf8), kind: .json)
        #expect(stored.storage.representation == .data)
        #expect(stored.bytes == Data("\"hello, world and more\"".utf8))
        stored.bytes = Data("12".utf8)
        #expect(stored == StoredValue(ValueBytes(Array("12".utf8)), kind: .json))
        #expect(stored != StoredValue(ValueBytes(Array("12".utf8)), kind: .original))
    }

    /// Every digit count, at both of its ends, with and without a sign: `encodeInt` counts the
    /// digits before writing them, and a count off by one drops or pads a digit.
    static let intsOfEveryLength: [Int] =
        [0, 7, -7, Int.max, Int.min, Int.min + 1]
        + (1...18).flatMap { exponent -> [Int] in
            let power = (0..<exponent).reduce(1) { product, _ in product * 10 }
            return [power - 1, power, -(power - 1), -power]
        }

    @Test(arguments: intsOfEveryLength)
    func intsEncodeAsJSONEncoderDoes(value: Int) throws {
        let encoded = ValueCoding.encodeInt(value)
        #expect(encoded.data == (try JSONEncoder().encode(value)))
        #expect(encoded.representation == (encoded.count <= ValueBytes.inlineCapacity ? .inline : .heap))
    }
}
