import Testing

@testable import TinyStorage

/// A ``SmallList`` behaves as an array of its elements, whether it holds one inline or many.
@Suite struct SmallListTests {
    @Test func appendingAndRemovingKeepsTheElementsInOrder() {
        var list = SmallList<Int>()
        var model: [Int] = []
        #expect(Array(list) == model)
        for value in 0..<5 {
            list.append(value)
            model.append(value)
            #expect(Array(list) == model)
            #expect(list.count == model.count)
        }
        list.removeAll(keepingCapacity: true)
        #expect(list.isEmpty)
        list.append(7)
        #expect(Array(list) == [7])
        list.append(contentsOf: [8, 9])
        #expect(Array(list) == [7, 8, 9])
    }

    @Test func listsOfTheSameElementsAreEqualHoweverMade() {
        let one = SmallList(3)
        var appended = SmallList<Int>()
        appended.append(3)
        #expect(one == SmallList([3]))
        #expect(one == appended)
        #expect(one == [3])
        #expect(SmallList([1, 2]) == [1, 2])
        #expect(SmallList([1, 2]) != [2, 1])
        #expect(SmallList<Int>() == [])
        #expect(one != [])
    }
}
