import Foundation

/// Every key's ``CachedEntry``: the engine's index, which every commit and every cached read
/// looks a key up in.
///
/// A hash table of our own rather than a `[String: CachedEntry]` (issue 12): an overwrite spent
/// about 670 instructions in the dictionary, 250 of them in SipHash, and most of the rest in
/// probing and in string comparisons with the other keys of its probe sequence. Here:
///
/// - the key's UTF-8 bytes are hashed eight at a time with a multiply-and-mix hash, seeded once
///   per process (a file crafted to collide cannot be prepared in advance);
/// - entries are kept densely, in insertion order, with their hash; the table itself is an array
///   of words, each 32 bits of an entry's hash and its position, probed linearly at a load of at
///   most one half. A key's bytes are compared only when those 32 bits match, so a lookup almost
///   never compares two different keys;
/// - growing rebuilds the table from the stored hashes, without hashing a key again;
/// - a removal shifts the table's next words back (no tombstones) and moves the last entry into
///   the gap, so the entries stay dense.
///
/// A value type, as the dictionary was: a compaction's snapshot shares the storage until the
/// next commit copies it.
struct EntryIndex {
    /// One key with its entry, and the hash the table places it by.
    struct Item {
        var key: String
        var hash: UInt64
        var entry: CachedEntry
    }

    /// The entries, densely: a word of ``table`` refers to one by its position.
    private var elements: [Item] = []
    /// A power of two of words; `0` is a free word, otherwise the hash's upper 32 bits over the
    /// element's position plus one.
    private var table: [UInt64] = Self.emptyTable
    /// Seeds every hash this index computes.
    private let seed = Self.processSeed

    private static let emptyTable: [UInt64] = [0]
    /// NB: fixed when `SWIFT_DETERMINISTIC_HASHING` is set, as the standard library's `Hasher`
    /// is then, so that instruction counts and test replays do not move with probe lengths.
    static let processSeed: UInt64 =
        getenv("SWIFT_DETERMINISTIC_HASHING") == nil ? .random(in: .min ... .max) : 0x5EED
    private static let tagMask: UInt64 = 0xFFFF_FFFF_0000_0000
    private static let positionMask: UInt64 = 0x0000_0000_FFFF_FFFF

    init() {}

    // MARK: Reading

    var count: Int { elements.count }
    var isEmpty: Bool { elements.isEmpty }
    /// Positions of the entries, for ``subscript(entryAt:)``: valid until the next change.
    var indices: Range<Int> { elements.indices }
    /// The keys, in the order their entries are kept.
    var keys: [String] { elements.map(\.key) }

    /// The entry stored for `key`, or `nil`; setting `nil` removes it.
    subscript(key: String) -> CachedEntry? {
        get { index(forKey: key).map { elements[$0].entry } }
        set {
            if let newValue { updateValue(newValue, forKey: key) } else { removeValue(forKey: key) }
        }
    }

    /// The entry at a position ``index(forKey:)`` or ``indices`` gave, read or changed in place.
    subscript(entryAt position: Int) -> CachedEntry {
        get { elements[position].entry }
        _modify { yield &elements[position].entry }
    }

    /// Drops the decoded values of entries, from `start` on and round, until the stored bytes of
    /// those still decoded are at most `budget`; never the entry at `spared`. Returns those
    /// bytes, and leaves `start` where it stopped.
    mutating func dropDecodedValues(downTo budget: Int, sparing spared: Int?, startingAt start: inout Int) -> Int {
        var kept = 0
        for position in elements.indices where elements[position].entry.decoded.isKept {
            kept += elements[position].entry.bytes.count
        }
        guard kept > budget, !elements.isEmpty else { return kept }
        var position = start < elements.count ? start : 0
        for _ in elements.indices where kept > budget {
            if position != spared, elements[position].entry.decoded.isKept {
                kept -= elements[position].entry.bytes.count
                elements[position].entry.decoded = .none
            }
            position = position + 1 < elements.count ? position + 1 : 0
        }
        start = position
        return kept
    }

    /// Where `key`'s entry is (for ``subscript(entryAt:)``), or `nil` when it has none.
    @inline(__always)
    func index(forKey key: String) -> Int? {
        find(key, hash: hash(key)).position
    }

    /// Where a key's entry is, or where it would go: found once, so that a commit can look,
    /// append its record, then change the index (``replace(at:with:)``, ``insert(_:forKey:at:)``,
    /// ``remove(at:)``) without hashing the key again. Valid until the index next changes.
    struct Slot {
        fileprivate let hash: UInt64
        fileprivate let word: Int
        /// The entry's position (see ``subscript(entryAt:)``), or `nil` when the key has none.
        let position: Int?
    }

    /// Where `key`'s entry is, or would go.
    @inline(__always)
    func slot(forKey key: String) -> Slot {
        let hash = hash(key)
        let found = find(key, hash: hash)
        return Slot(hash: hash, word: found.word, position: found.position)
    }

    /// Whether the entry at `position` holds `bytes` of `kind` expiring at `deadline`, compared
    /// where they lie.
    @inline(__always)
    func holds(_ bytes: ValueBytes, kind: ValueKind, deadline: Deadline?, at position: Int) -> Bool {
        // NB: through the element's address: subscripting the buffer copied the whole entry
        // out (retaining its bytes and decoded value) to compare a ``ValueBytes``.
        elements.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return false }
            let element = base + position
            return element.pointee.entry.kind == kind && element.pointee.entry.deadline == deadline
                && element.pointee.entry.bytes == bytes
        }
    }

    /// The size of the record a compacted file holds for the entry at `position`, whose key is
    /// `keyLength` bytes long, read in place.
    ///
    /// NB: through the element's address, field by field: passing the entry on copied it
    /// (retaining its bytes and decoded value, then releasing them), a sixth of an overwrite.
    @inline(__always)
    func recordSize(at position: Int, keyLength: Int) -> Int {
        elements.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return 0 }
            let element = base + position
            return LogCommit.putRecordSize(
                keyLength: keyLength, valueLength: element.pointee.entry.bytes.count,
                expires: element.pointee.entry.expires)
        }
    }

    /// The deadline of the entry at `position`, read in place.
    @inline(__always)
    func deadline(at position: Int) -> Deadline? {
        elements.withUnsafeBufferPointer { $0[position].entry.deadline }
    }

    /// Every entry's value transformed, in a dictionary.
    func mapValues<T, E: Error>(_ transform: (CachedEntry) throws(E) -> T) throws(E) -> [String: T] {
        var result: [String: T] = [:]
        result.reserveCapacity(elements.count)
        for element in elements { result[element.key] = try transform(element.entry) }
        return result
    }

    // MARK: Changing

    /// Stores `entry` for `key`; returns the entry it replaced, or `nil` when the key was new.
    @discardableResult
    mutating func updateValue(_ entry: CachedEntry, forKey key: String) -> CachedEntry? {
        let slot = slot(forKey: key)
        if let position = slot.position {
            var entry = entry
            swap(&entry, &elements[position].entry)
            return entry
        }
        insert(entry, forKey: key, at: slot)
        return nil
    }

    /// Replaces the entry of the key `slot` was found for; nothing may have changed the index since.
    ///
    /// NB: `entry` is consumed, so it is moved into place: borrowed, it was copied there (a
    /// value-witness call retaining its bytes' storage) and the caller's destroyed.
    @inline(__always)
    mutating func replace(at slot: Slot, with entry: consuming CachedEntry) {
        guard let position = slot.position else { preconditionFailure("no entry at the slot") }
        elements[position].entry = entry
    }

    /// Adds `entry` for `key`, which `slot` was found for and found missing; nothing may have
    /// changed the index since.
    mutating func insert(_ entry: consuming CachedEntry, forKey key: String, at slot: Slot) {
        precondition(slot.position == nil, "the key has an entry")
        var word = slot.word
        // NB: only an insert grows the table; the free word is then found in the new one.
        if (elements.count + 1) * 2 > table.count {
            grow(toHold: elements.count + 1)
            word = find(key, hash: slot.hash).word
        }
        // NB: compared as a `UInt64`: `Int(positionMask)` traps where an `Int` has 32 bits (watchOS).
        precondition(UInt64(elements.count) < Self.positionMask, "too many keys for one index")
        table[word] = slot.hash & Self.tagMask | UInt64(truncatingIfNeeded: elements.count + 1)
        elements.append(Item(key: key, hash: slot.hash, entry: entry))
    }

    /// Removes `key`'s entry and returns it, or `nil` when it had none.
    @discardableResult
    mutating func removeValue(forKey key: String) -> CachedEntry? {
        let slot = slot(forKey: key)
        guard slot.position != nil else { return nil }
        return remove(at: slot)
    }

    /// Removes the entry of the key `slot` was found for and returns it; nothing may have
    /// changed the index since.
    @discardableResult
    mutating func remove(at slot: Slot) -> CachedEntry {
        guard let position = slot.position else { preconditionFailure("no entry at the slot") }
        freeWord(slot.word)
        let last = elements.count - 1
        if position != last {
            // The last element moves into the gap: its word must say so.
            let lastWord = word(of: last)
            table[lastWord] = table[lastWord] & Self.tagMask | UInt64(truncatingIfNeeded: position + 1)
            elements.swapAt(position, last)
        }
        return elements.removeLast().entry
    }

    mutating func removeAll(keepingCapacity: Bool = false) {
        if keepingCapacity {
            elements.removeAll(keepingCapacity: true)
            for word in table.indices { table[word] = 0 }
        } else {
            elements = []
            table = Self.emptyTable
        }
    }

    /// Makes room for `count` entries, so that many are added without growing the table.
    mutating func reserveCapacity(_ count: Int) {
        elements.reserveCapacity(count)
        if count * 2 > table.count { grow(toHold: count) }
    }

    // MARK: The table

    /// The table word that refers to `key`'s element and its position, or the free word where
    /// it would go.
    @inline(__always)
    private func find(_ key: String, hash: UInt64) -> (word: Int, position: Int?) {
        table.withUnsafeBufferPointer { table in
            elements.withUnsafeBufferPointer { elements in
                let mask = table.count - 1
                let tag = hash & Self.tagMask
                var word = Int(truncatingIfNeeded: hash) & mask
                while true {
                    let value = table[word]
                    if value == 0 { return (word, nil) }
                    if value & Self.tagMask == tag {
                        let position = Int(truncatingIfNeeded: value & Self.positionMask) - 1
                        if elements[position].hash == hash && elements[position].key == key {
                            return (word, position)
                        }
                    }
                    word = (word + 1) & mask
                }
            }
        }
    }

    /// The table word that refers to the element at `position`.
    private func word(of position: Int) -> Int {
        let mask = table.count - 1
        var word = Int(truncatingIfNeeded: elements[position].hash) & mask
        while Int(truncatingIfNeeded: table[word] & Self.positionMask) != position + 1 { word = (word + 1) & mask }
        return word
    }

    /// Frees a word, moving back the words after it that their probe from their home word would
    /// otherwise no longer reach (linear probing's deletion, without tombstones).
    private mutating func freeWord(_ freed: Int) {
        let mask = table.count - 1
        var hole = freed
        var next = freed
        while true {
            next = (next + 1) & mask
            let value = table[next]
            if value == 0 { break }
            let position = Int(truncatingIfNeeded: value & Self.positionMask) - 1
            let home = Int(truncatingIfNeeded: elements[position].hash) & mask
            // NB: it may move into the hole unless its home lies cyclically after the hole, up
            // to where it is.
            if (next &- home) & mask >= (next &- hole) & mask {
                table[hole] = value
                hole = next
            }
        }
        table[hole] = 0
    }

    /// Rebuilds the table with room for `count` elements at a load of at most one half.
    private mutating func grow(toHold count: Int) {
        var size = Swift.max(16, table.count)
        while size < count * 2 { size *= 2 }
        var table = [UInt64](repeating: 0, count: size)
        let mask = size - 1
        for (position, element) in elements.enumerated() {
            var word = Int(truncatingIfNeeded: element.hash) & mask
            while table[word] != 0 { word = (word + 1) & mask }
            table[word] = element.hash & Self.tagMask | UInt64(truncatingIfNeeded: position + 1)
        }
        self.table = table
    }

    // MARK: Hashing

    @inline(__always)
    private func hash(_ key: String) -> UInt64 {
        if let hash = key.utf8.withContiguousStorageIfAvailable({ Self.hash(UnsafeRawBufferPointer($0), seed: seed) }) {
            return hash
        }
        var key = key
        return key.withUTF8 { Self.hash(UnsafeRawBufferPointer($0), seed: seed) }
    }

    /// A 64-bit hash of `bytes`: eight bytes at a time, each multiplied in and folded, the last
    /// partial word read overlapping the one before (the length is hashed too, so two keys
    /// cannot collide that way), then a final mix so every bit of the result depends on every
    /// byte.
    @inline(__always)
    static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64) -> UInt64 {
        let count = bytes.count
        var hash = seed ^ (UInt64(truncatingIfNeeded: count) &* 0x9E37_79B9_7F4A_7C15)
        guard let base = bytes.baseAddress, count > 0 else { return finalMix(hash) }
        func fold(_ word: UInt64) {
            hash = (hash ^ word) &* 0xBF58_476D_1CE4_E5B9
            hash ^= hash &>> 31
        }
        if count >= 8 {
            var offset = 0
            while offset + 8 <= count {
                fold(base.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
                offset += 8
            }
            if offset < count { fold(base.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)) }
        } else if count >= 4 {
            let low = UInt64(base.loadUnaligned(as: UInt32.self))
            let high = UInt64(base.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self))
            fold(low | high &<< 32)
        } else {
            let first = UInt64(base.load(as: UInt8.self))
            let middle = UInt64(base.load(fromByteOffset: count / 2, as: UInt8.self))
            let last = UInt64(base.load(fromByteOffset: count - 1, as: UInt8.self))
            fold(first | middle &<< 8 | last &<< 16)
        }
        return finalMix(hash)
    }

    /// Every bit of the result depends on every bit of `value` (MurmurHash3's finalizer constants).
    @inline(__always)
    private static func finalMix(_ value: UInt64) -> UInt64 {
        var value = value
        value ^= value &>> 33
        value &*= 0xFF51_AFD7_ED55_8CCD
        value ^= value &>> 33
        value &*= 0xC4CE_B9FE_1A85_EC53
        value ^= value &>> 33
        return value
    }
}

extension EntryIndex: Sequence {
    /// Each key with its entry, in the order the entries are kept.
    func makeIterator() -> some IteratorProtocol<(key: String, value: CachedEntry)> {
        elements.lazy.map { (key: $0.key, value: $0.entry) }.makeIterator()
    }
}
