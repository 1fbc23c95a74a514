import Foundation
import Testing

@testable import TinyStorage

/// The engine's own hash table (`EntryIndex`) against the dictionary it replaced: after any
/// sequence of inserts, overwrites and removals it must hold exactly what a `[String: …]` holds.
@Suite struct EntryIndexTests {
    static func entry(_ number: Int) -> CachedEntry {
        CachedEntry(bytes: ValueBytes(Array(String(number).utf8)), version: UInt64(number), kind: .json)
    }

    /// Keys of every length the hash reads differently (0, 1–3, 4–7, 8, 9–15, 16, longer), some
    /// not ASCII, some equal in their first or last eight bytes.
    static func randomKey(using generator: inout SeededGenerator) -> String {
        let stems = ["", "a", "ab", "abc", "abcd", "key-", "key-0005", "prefix-shared-by-many-", "ключ-", "🔑"]
        let stem = stems.randomElement(using: &generator) ?? ""
        let tail = Int.random(in: 0..<64, using: &generator)
        return Bool.random(using: &generator) ? stem + String(tail) : String(tail) + stem
    }

    /// Checks `index` holds exactly `model`: every key found with its entry, count and keys equal.
    static func expectSame(_ index: EntryIndex, _ model: [String: CachedEntry], seed: UInt64) {
        #expect(index.count == model.count, "seed \(seed)")
        #expect(Set(index.keys) == Set(model.keys), "seed \(seed)")
        for (key, entry) in model {
            #expect(index[key]?.bytes == entry.bytes, "key \(key), seed \(seed)")
            #expect(index.index(forKey: key).map { index[entryAt: $0].version } == entry.version)
        }
        var seen = 0
        for (key, entry) in index {
            #expect(model[key]?.version == entry.version, "key \(key), seed \(seed)")
            seen += 1
        }
        #expect(seen == model.count)
    }

    @Test func holdsWhatADictionaryHoldsThroughRandomChanges() {
        let seed = SeededGenerator.makeSeed()
        var generator = SeededGenerator(seed: seed)
        var index = EntryIndex()
        var model: [String: CachedEntry] = [:]
        for step in 0..<20_000 {
            let key = Self.randomKey(using: &generator)
            switch Int.random(in: 0..<10, using: &generator) {
            case 0..<4:
                #expect(index.removeValue(forKey: key)?.version == model.removeValue(forKey: key)?.version)
            case 4:
                index[key] = Self.entry(step)
                model[key] = Self.entry(step)
            case 6:
                // As a single-key commit changes it: looked up once, then changed at the slot.
                let slot = index.slot(forKey: key)
                #expect((slot.position != nil) == (model[key] != nil))
                if slot.position == nil {
                    index.insert(Self.entry(step), forKey: key, at: slot)
                } else if step % 2 == 0 {
                    index.replace(at: slot, with: Self.entry(step))
                } else {
                    index.remove(at: slot)
                    model[key] = nil
                    break
                }
                model[key] = Self.entry(step)
            case 5 where step % 500 == 0:
                let keep = Bool.random(using: &generator)
                index.removeAll(keepingCapacity: keep)
                model.removeAll()
            default:
                let replaced = index.updateValue(Self.entry(step), forKey: key)
                #expect(replaced?.version == model.updateValue(Self.entry(step), forKey: key)?.version)
            }
            #expect(index[key]?.version == model[key]?.version, "step \(step), seed \(seed)")
            if step % 1_000 == 0 { Self.expectSame(index, model, seed: seed) }
        }
        Self.expectSame(index, model, seed: seed)
    }

    /// Removing keys one by one from a full table, in random order, leaves every other key
    /// findable: what linear probing's deletion gets wrong when it frees a word too early.
    @Test func everyKeyStaysFindableWhileTheOthersAreRemoved() {
        let seed = SeededGenerator.makeSeed()
        var generator = SeededGenerator(seed: seed)
        var index = EntryIndex()
        let keys = (0..<2_000).map { "k\($0)" }
        for (number, key) in keys.enumerated() { index[key] = Self.entry(number) }
        var remaining = Set(keys)
        for key in keys.shuffled(using: &generator) {
            #expect(index.removeValue(forKey: key) != nil)
            remaining.remove(key)
            if remaining.count % 97 == 0 {
                #expect(remaining.allSatisfy { index[$0] != nil }, "seed \(seed)")
                #expect(index.count == remaining.count)
            }
        }
        #expect(index.isEmpty)
        #expect(index["k1"] == nil)
    }

    /// A copy is a value: changing it leaves the original as it was (a compaction's snapshot
    /// relies on it).
    @Test func aCopyIsIndependent() {
        var index = EntryIndex()
        for number in 0..<100 { index["k\(number)"] = Self.entry(number) }
        let snapshot = index
        index["k1"] = Self.entry(1_001)
        index.removeValue(forKey: "k2")
        index["new"] = Self.entry(7)
        if let position = index.index(forKey: "k3") { index[entryAt: position].version = 99 }
        #expect(snapshot.count == 100)
        #expect(snapshot["k1"]?.version == 1)
        #expect(snapshot["k2"]?.version == 2)
        #expect(snapshot["k3"]?.version == 3)
        #expect(snapshot["new"] == nil)
        #expect(index["k3"]?.version == 99)
    }

    /// Two keys whose hashes share the 32 bits kept in the table and the same home word are
    /// told apart by their full hash and bytes, found, changed and removed independently
    /// (found by a birthday search over the process's seed: about 2^18 hashes).
    @Test func keysWhoseTableWordsLookAlikeAreToldApart() throws {
        func hash(_ key: String) -> UInt64 {
            Array(key.utf8).withUnsafeBytes { EntryIndex.hash($0, seed: EntryIndex.processSeed) }
        }
        // NB: the upper 32 bits and the lowest 4 (the home word in a table of 16).
        func signature(_ hash: UInt64) -> UInt64 { hash & 0xFFFF_FFFF_0000_000F }
        var seen: [UInt64: String] = [:]
        var pair: (String, String)?
        for number in 0..<4_000_000 {
            let key = "k\(number)"
            if let other = seen.updateValue(key, forKey: signature(hash(key))) {
                pair = (other, key)
                break
            }
        }
        let (first, second) = try #require(pair)
        #expect(hash(first) != hash(second))

        var index = EntryIndex()
        index[first] = Self.entry(1)
        index[second] = Self.entry(2)
        #expect(index[first]?.version == 1)
        #expect(index[second]?.version == 2)
        index[second] = Self.entry(3)
        #expect(index[first]?.version == 1)
        #expect(index.removeValue(forKey: first)?.version == 1)
        #expect(index[first] == nil)
        #expect(index[second]?.version == 3)
        #expect(index.count == 1)
    }

    /// The hash reads every byte: keys that differ in any one byte, at any length up to 40,
    /// hash differently (a hash that skipped bytes would collide here every time).
    @Test func theHashDependsOnEveryByte() {
        for length in 0...40 {
            let base = [UInt8](repeating: 0x61, count: length)
            let hash = base.withUnsafeBytes { EntryIndex.hash($0, seed: 1) }
            for position in 0..<length {
                var changed = base
                changed[position] ^= 0x01
                #expect(
                    changed.withUnsafeBytes { EntryIndex.hash($0, seed: 1) } != hash, "length \(length) at \(position)")
            }
            let longer = base + [0]
            #expect(longer.withUnsafeBytes { EntryIndex.hash($0, seed: 1) } != hash, "length \(length) and a NUL")
        }
    }
}
