package import Foundation

/// A stored value's bytes, held the cheapest way their length and origin allow: up to
/// ``inlineCapacity`` bytes in the value itself, longer ones in a buffer of their own, and those
/// read from a file as the `Data` slice of its buffer the scan produced.
///
/// Equal when their bytes are, however each holds them.
///
/// NB: the commit path's currency for values, in place of `Data`. A `Data` longer than 14 bytes
/// costs two allocations (its storage object and its bytes), and every access to its storage
/// goes through the runtime's dynamic exclusivity checks (about 530 instructions an insert of a
/// 111-byte String, in callgrind), plus a retain and release of the storage on every copy. An
/// buffer of our own (``HeapBytes``) is one allocation, and reading it in place is not checked.
/// Values read at open stay `Data` slices: copying each into its own allocation would slow the open.
///
/// NB: `@unchecked Sendable` because `ManagedBuffer` is not `Sendable`: a ``HeapBytes`` is
/// never written after ``HeapBytes/make(count:initializingWith:)`` returns, so sharing one
/// across threads only ever reads it.
package struct ValueBytes: @unchecked Sendable {
    /// The longest value kept inline.
    ///
    /// NB: 14 bytes, not the 15 two words and a count would hold: with the count in a 15th byte
    /// the 16th stays unused, and the enum keeps its case in bits no case uses, so a
    /// ``ValueBytes`` takes 16 bytes as `Data` does, and a key's ``CachedEntry`` stays 48 (18
    /// bytes made it 56).
    package static let inlineCapacity = 14

    /// Where the bytes are.
    private enum Storage {
        /// Up to ``ValueBytes/inlineCapacity`` bytes, in memory order, the rest zero (so two
        /// inline values are equal exactly when their words and counts are).
        case inline(UInt64, UInt32, UInt16, count: UInt8)
        /// Longer bytes, in a buffer of their own, never changed once written.
        case heap(HeapBytes)
        /// Bytes as `Data`: a slice of a file's buffer, or a `Data` value handed to us.
        case data(Data)
    }

    private var storage: Storage

    /// No bytes.
    package init() {
        storage = .inline(0, 0, 0, count: 0)
    }

    /// Wraps `data` as it is: no copy is made.
    package init(_ data: Data) {
        storage = .data(data)
    }

    /// A copy of `bytes`.
    package init(_ bytes: [UInt8]) {
        self = bytes.withUnsafeBytes { ValueBytes(copying: $0) }
    }

    /// A copy of `raw`'s bytes, inline when short enough.
    package init(copying raw: UnsafeRawBufferPointer) {
        self.init(count: raw.count) { destination in
            guard let base = raw.baseAddress, let target = destination.baseAddress, !raw.isEmpty else { return }
            target.copyMemory(from: base, byteCount: raw.count)
        }
    }

    /// `count` bytes, written by `initialize` into memory of exactly that size (inline when short
    /// enough, else a new ``HeapBytes``); `initialize` must write every byte.
    package init(count: Int, initializingWith initialize: (UnsafeMutableRawBufferPointer) -> Void) {
        if count <= Self.inlineCapacity {
            var words: (UInt64, UInt32, UInt16) = (0, 0, 0)
            Swift.withUnsafeMutableBytes(of: &words) {
                initialize(UnsafeMutableRawBufferPointer(rebasing: $0[..<count]))
            }
            storage = .inline(words.0, words.1, words.2, count: UInt8(truncatingIfNeeded: count))
        } else {
            storage = .heap(HeapBytes.make(count: count, initializingWith: initialize))
        }
    }

    /// The number of bytes.
    package var count: Int {
        switch storage {
        case .inline(_, _, _, let count): Int(count)
        case .heap(let bytes): bytes.count
        case .data(let data): data.count
        }
    }

    /// Whether there are no bytes.
    package var isEmpty: Bool { count == 0 }

    /// Calls `body` with the bytes, where they lie (or, inline, in a copy on the stack).
    package func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        switch storage {
        case .inline(let first, let second, let third, let count):
            return try Swift.withUnsafeBytes(of: (first, second, third)) {
                try body(UnsafeRawBufferPointer(rebasing: $0[..<Int(count)]))
            }
        case .heap(let bytes): return try bytes.withUnsafeBytes(body)
        case .data(let data): return try data.withUnsafeBytes(body)
        }
    }

    /// The bytes as `Data`, for the paths that need one (decoding with `JSONDecoder`, the raw
    /// API, the command-line tool): wrapped bytes as they are, the others copied.
    package var data: Data {
        switch storage {
        case .inline: withUnsafeBytes { Data($0) }
        case .heap: withUnsafeBytes { Data($0) }
        case .data(let data): data
        }
    }

    /// How a value holds its bytes, for tests.
    enum Representation: Equatable {
        case inline, heap, data
    }

    /// How this value holds its bytes.
    var representation: Representation {
        switch storage {
        case .inline: .inline
        case .heap: .heap
        case .data: .data
        }
    }

    /// The same bytes in storage of their own: a wrapped `Data` (possibly a slice of a file's
    /// buffer, which it would keep alive) is copied; the others already are their own.
    package func detached() -> ValueBytes {
        guard case .data(let data) = storage else { return self }
        return data.withUnsafeBytes { ValueBytes(copying: $0) }
    }
}

extension ValueBytes: Hashable {
    /// Equal when the bytes are, however each side holds them.
    ///
    /// NB: inlined, so the usual case, two inline values (an `Int` overwrite compares the value
    /// it replaces), is three comparisons where the operands lie, nothing copied.
    @inline(__always)
    package static func == (lhs: ValueBytes, rhs: ValueBytes) -> Bool {
        // NB: two inline values compare by their words: the bytes past `count` are zero.
        if case .inline(let first, let second, let third, let count) = lhs.storage,
            case .inline(let otherFirst, let otherSecond, let otherThird, let otherCount) = rhs.storage
        {
            return first == otherFirst && second == otherSecond && third == otherThird && count == otherCount
        }
        return haveSameBytes(lhs, rhs)
    }

    /// Whether two values, not both inline, hold the same bytes.
    @inline(never)
    private static func haveSameBytes(_ lhs: ValueBytes, _ rhs: ValueBytes) -> Bool {
        if case .heap(let mine) = lhs.storage, case .heap(let theirs) = rhs.storage, mine === theirs { return true }
        let count = lhs.count
        guard count == rhs.count else { return false }
        guard count > 0 else { return true }
        return lhs.withUnsafeBytes { mine in
            rhs.withUnsafeBytes { theirs in
                guard let mine = mine.baseAddress, let theirs = theirs.baseAddress else { return false }
                return memcmp(mine, theirs, count) == 0
            }
        }
    }

    /// Hashes the bytes alone, as `==` compares them.
    package func hash(into hasher: inout Hasher) {
        withUnsafeBytes { hasher.combine(bytes: $0) }
    }
}

/// The bytes of a ``ValueBytes`` too long to keep inline: their count (the header), then the
/// bytes, in one allocation.
///
/// NB: a `ManagedBuffer` of our own rather than a `[UInt8]`: an array made with
/// `init(unsafeUninitializedCapacity:)` was built by an unspecialized initializer in the standard
/// library, which looked up its storage class's generic metadata on every call (about 160
/// instructions an insert). This class's metadata is static.
final class HeapBytes: ManagedBuffer<Int, UInt8> {
    /// A buffer of `count` bytes, written by `initialize` (every byte).
    static func make(count: Int, initializingWith initialize: (UnsafeMutableRawBufferPointer) -> Void) -> HeapBytes {
        let buffer = unsafeDowncast(create(minimumCapacity: count) { _ in count }, to: HeapBytes.self)
        buffer.withUnsafeMutablePointerToElements { initialize(UnsafeMutableRawBufferPointer(start: $0, count: count)) }
        return buffer
    }

    /// The number of bytes.
    ///
    /// NB: read through a pointer, not as `header`: `header` is a stored `var` of a class, so
    /// each read of it went through the runtime's dynamic exclusivity checks (`swift_beginAccess`,
    /// about 60 instructions, four an insert of a 111-byte String).
    var count: Int {
        withUnsafeMutablePointerToHeader { $0.pointee }
    }

    /// Calls `body` with the bytes.
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeMutablePointers { count, elements in
            try body(UnsafeRawBufferPointer(start: elements, count: count.pointee))
        }
    }
}
