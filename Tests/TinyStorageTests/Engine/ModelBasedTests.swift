import Foundation
import Testing

@testable import TinyStorage

/// Random operations on two instances of one store, checked step by step against a dictionary.
/// Values are sometimes large, so the run crosses several compactions. The seed is printed in
/// every failure; set `TINYSTORAGE_TEST_SEED` to replay it.
@Suite struct ModelBasedTests {
    @Test func randomOperationsMatchADictionaryModel() throws {
        let seed = SeededGenerator.makeSeed()
        var generator = SeededGenerator(seed: seed)
        try withTemporaryDirectory { directory throws in
            var stores = [openStore(directory), openStore(directory)]
            var model: [String: Data] = [:]
            let keys = (0..<24).map { "key\($0)" }
            let big = String(repeating: "x", count: 6_000)
            var compactions = 0
            var lastGeneration = try headerGeneration(stores[0].fileURL)

            for step in 0..<3_000 {
                let which = Int.random(in: 0..<2, using: &generator)
                let storage = stores[which]
                let key = keys.randomElement(using: &generator) ?? "key0"
                let context = "seed \(seed), step \(step)"
                switch Int.random(in: 0..<100, using: &generator) {
                case 0..<35:
                    let value = Int.random(in: -1_000...1_000, using: &generator)
                    try storage.storeOrThrow(value, forKey: key)
                    model[key] = Data(String(value).utf8)
                case 35..<55:
                    let value = "\(step)-" + big.prefix(Int.random(in: 0...big.count, using: &generator))
                    try storage.storeOrThrow(value, forKey: key)
                    model[key] = try storage.rawJSON(forKey: key)
                case 55..<65:
                    try storage.storeOrThrow(nil, forKey: key)
                    model[key] = nil
                case 65..<75:
                    let amount = Int.random(in: -5...5, using: &generator)
                    let current = model[key].flatMap { Int(String(decoding: $0, as: UTF8.self)) }
                    if model[key] == nil || current != nil {
                        let result = try storage.incrementIntegerOrThrow(forKey: key, by: amount)
                        #expect(result == (current ?? 0) + amount, "\(context)")
                        model[key] = Data(String(result).utf8)
                    } else {
                        #expect(throws: TinyStorageError.self) { try storage.incrementIntegerOrThrow(forKey: key) }
                    }
                case 75..<85:
                    let skip = Bool.random(using: &generator)
                    var items: [String: any Encodable] = [:]
                    for _ in 0..<Int.random(in: 1...5, using: &generator) {
                        items[keys.randomElement(using: &generator) ?? "key0"] = step
                    }
                    try storage.bulkStoreOrThrow(items: items, skipKeyIfAlreadyPresent: skip)
                    for itemKey in items.keys where !(skip && model[itemKey] != nil) {
                        model[itemKey] = Data(String(step).utf8)
                    }
                case 85..<87:
                    try storage.resetOrThrow()
                    model.removeAll()
                case 87..<92:
                    stores[which] = openStore(directory)
                default:
                    let other = stores[1 - which]
                    #expect(try other.rawJSON(forKey: key) == model[key], "\(context): \(key)")
                }
                #expect(try storage.rawJSON(forKey: key) == model[key], "\(context): \(key)")
                let generation = try headerGeneration(stores[0].fileURL)
                if generation != lastGeneration {
                    compactions += 1
                    lastGeneration = generation
                }
                if step % 500 == 499 {
                    for candidate in stores + [openStore(directory)] {
                        #expect(try candidate.rawJSON() == model, "\(context): full comparison")
                    }
                }
            }
            #expect(compactions > 0, "seed \(seed): the run never compacted")
            #expect(try openStore(directory).rawJSON() == model, "seed \(seed)")
        }
    }
}
