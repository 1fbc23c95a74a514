/// A list that holds a single element inline and more in an array: what a commit carries (its
/// operations, the keys it changed), which nearly always is one thing.
///
/// NB: an `Array` of one element is a heap allocation, and a commit of one key made two of
/// them (its operation, its changed key), with their reference counting: a tenth of an Int
/// overwrite. A list of one allocates nothing.
struct SmallList<Element> {
    /// The element while there is exactly one; `rest` is then empty.
    private var single: Element?
    /// The elements while there are none or more than one.
    private var rest: [Element] = []

    init() {}

    init(_ element: Element) {
        single = element
    }

    init<S: Sequence>(_ elements: S) where S.Element == Element {
        rest = Array(elements)
        if rest.count == 1 { single = rest.removeLast() }
    }

    mutating func append(_ element: Element) {
        if let first = single {
            // NB: into `rest`, which keeps whatever capacity it had (a reused commit's).
            single = nil
            rest.append(first)
            rest.append(element)
        } else if rest.isEmpty {
            single = element
        } else {
            rest.append(element)
        }
    }

    mutating func append<S: Sequence>(contentsOf elements: S) where S.Element == Element {
        for element in elements { append(element) }
    }

    mutating func removeAll(keepingCapacity: Bool = false) {
        single = nil
        rest.removeAll(keepingCapacity: keepingCapacity)
    }

    mutating func reserveCapacity(_ capacity: Int) {
        rest.reserveCapacity(capacity)
    }
}

extension SmallList: RandomAccessCollection {
    var startIndex: Int { 0 }
    var endIndex: Int { single == nil ? rest.count : 1 }

    subscript(position: Int) -> Element {
        if let single {
            precondition(position == 0, "index out of range")
            return single
        }
        return rest[position]
    }
}

extension SmallList: ExpressibleByArrayLiteral {
    init(arrayLiteral elements: Element...) {
        self.init(elements)
    }
}

extension SmallList: Equatable where Element: Equatable {
    /// Equal when they hold equal elements in the same order, however each is held.
    static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.elementsEqual(rhs)
    }
}

extension SmallList: Sendable where Element: Sendable {}
