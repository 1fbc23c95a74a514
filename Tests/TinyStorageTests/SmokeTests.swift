import Foundation
import Testing
@testable import TinyStorage

@Suite struct SmokeTests {
    @Test func storeThenReopenReturnsValue() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        defer { try? FileManager.default.removeItem(at: dir) }
        let s = TinyStorage(insideDirectory: dir, name: "s")
        #expect(s.availability.isAvailable)
        s.store(5, forKey: "a")
        s.store("hi \"x\"/", forKey: "b")
        s.store([1, 2, 3], forKey: "c")
        s.store(Data([0, 1, 2, 255]), forKey: "d")
        #expect(s.retrieve(type: Int.self, forKey: "a") == 5)
        #expect(s.retrieve(type: Int.self, forKey: "a") == 5)
        #expect(s.incrementInteger(forKey: "a", by: 2) == 7)
        let t = TinyStorage(insideDirectory: dir, name: "s")
        #expect(t.retrieve(type: Int.self, forKey: "a") == 7)
        #expect(t.retrieve(type: String.self, forKey: "b") == "hi \"x\"/")
        #expect(t.retrieve(type: [Int].self, forKey: "c") == [1, 2, 3])
        #expect(t.retrieve(type: Data.self, forKey: "d") == Data([0, 1, 2, 255]))
        s.store(9, forKey: "a")
        #expect(t.retrieve(type: Int.self, forKey: "a") == 9)
        t.reset()
        #expect(s.allKeys.isEmpty)
        for i in 0..<100_000 { s.store(i, forKey: "k\(i % 100)") }
        let u = TinyStorage(insideDirectory: dir, name: "s")
        #expect(u.allKeys.count == 100)
        #expect(u.retrieve(type: Int.self, forKey: "k99") == 99_999)
    }
}
