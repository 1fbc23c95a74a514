// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import Foundation

/// A strict JSON (RFC 8259) syntax checker that finds where values start and end without
/// converting them, so `write` and `import` can store the user's JSON byte for byte and point at
/// the exact spot of a mistake.
///
/// ```swift
/// let members = try JSONScanner.members(ofObject: Data(#"{"a": 1, "b": [true]}"#.utf8))
/// // members[1].value is the range of `[true]`
/// ```
struct JSONScanner {
    /// Why the text is not JSON, and where.
    struct Failure: Error {
        /// What was expected, such as "expected ',' or '}'".
        let problem: String
        /// Line and column (both from 1) of the offending character.
        let line: Int
        let column: Int
        /// The offending character, or "the end of the input".
        let found: String

        var description: String { "\(problem) at line \(line), column \(column), found \(found)" }
    }

    /// One `"key": value` member of an object: ranges of the key's quoted string and of the value.
    struct Member {
        let key: Range<Int>
        let value: Range<Int>
    }

    /// Nesting deeper than this is refused rather than risking the stack.
    static let maximumDepth = 512

    private let bytes: [UInt8]
    private var index = 0
    private var depth = 0

    private init(_ data: Data) { bytes = Array(data) }

    /// Checks that `data` holds exactly one JSON value (of any kind), with optional whitespace
    /// around it, and returns the value's range.
    static func value(in data: Data) throws(Failure) -> Range<Int> {
        var scanner = JSONScanner(data)
        scanner.skipWhitespace()
        let start = scanner.index
        try scanner.scanValue()
        let end = scanner.index
        try scanner.expectEnd()
        return start..<end
    }

    /// Checks that `data` holds exactly one JSON object and returns its members in order.
    static func members(ofObject data: Data) throws(Failure) -> [Member] {
        var scanner = JSONScanner(data)
        scanner.skipWhitespace()
        guard scanner.peek == UInt8(ascii: "{") else { throw scanner.failure("expected a JSON object '{'") }
        var members: [Member] = []
        try scanner.scanObject { members.append($0) }
        try scanner.expectEnd()
        return members
    }

    // MARK: Grammar

    private mutating func scanValue() throws(Failure) {
        guard let byte = peek else { throw failure("expected a JSON value") }
        switch byte {
        case UInt8(ascii: "{"): try scanObject { _ in }
        case UInt8(ascii: "["): try scanArray()
        case UInt8(ascii: "\""): try scanString()
        case UInt8(ascii: "t"): try scanLiteral("true")
        case UInt8(ascii: "f"): try scanLiteral("false")
        case UInt8(ascii: "n"): try scanLiteral("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try scanNumber()
        default: throw failure("expected a JSON value")
        }
    }

    private mutating func scanObject(_ member: (Member) -> Void) throws(Failure) {
        try enter()
        index += 1  // {
        skipWhitespace()
        if peek == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return
        }
        while true {
            guard peek == UInt8(ascii: "\"") else { throw failure("expected a key in double quotes") }
            let keyStart = index
            try scanString()
            let key = keyStart..<index
            skipWhitespace()
            guard peek == UInt8(ascii: ":") else { throw failure("expected ':' after the key") }
            index += 1
            skipWhitespace()
            let valueStart = index
            try scanValue()
            member(Member(key: key, value: valueStart..<index))
            skipWhitespace()
            switch peek {
            case UInt8(ascii: ","):
                index += 1
                skipWhitespace()
            case UInt8(ascii: "}"):
                index += 1
                depth -= 1
                return
            default: throw failure("expected ',' or '}'")
            }
        }
    }

    private mutating func scanArray() throws(Failure) {
        try enter()
        index += 1  // [
        skipWhitespace()
        if peek == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return
        }
        while true {
            try scanValue()
            skipWhitespace()
            switch peek {
            case UInt8(ascii: ","):
                index += 1
                skipWhitespace()
            case UInt8(ascii: "]"):
                index += 1
                depth -= 1
                return
            default: throw failure("expected ',' or ']'")
            }
        }
    }

    private mutating func scanString() throws(Failure) {
        index += 1  // opening quote
        while let byte = peek {
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return
            case UInt8(ascii: "\\"):
                index += 1
                switch peek {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                    UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    index += 1
                case UInt8(ascii: "u"):
                    index += 1
                    for _ in 0..<4 {
                        guard let digit = peek, Self.isHexDigit(digit) else {
                            throw failure("expected four hex digits after \\u")
                        }
                        index += 1
                    }
                default: throw failure("expected an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)")
                }
            case 0..<0x20:
                throw failure("expected a closing '\"' (control characters must be escaped in strings)")
            default:
                index += 1
            }
        }
        throw failure("expected a closing '\"'")
    }

    private mutating func scanNumber() throws(Failure) {
        if peek == UInt8(ascii: "-") { index += 1 }
        if peek == UInt8(ascii: "0") {
            index += 1
        } else {
            try digits("expected a digit")
        }
        if peek == UInt8(ascii: ".") {
            index += 1
            try digits("expected a digit after '.'")
        }
        if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
            index += 1
            if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { index += 1 }
            try digits("expected a digit in the exponent")
        }
    }

    private mutating func digits(_ problem: String) throws(Failure) {
        guard let first = peek, Self.isDigit(first) else { throw failure(problem) }
        while let byte = peek, Self.isDigit(byte) { index += 1 }
    }

    private mutating func scanLiteral(_ word: String) throws(Failure) {
        for expected in word.utf8 {
            guard peek == expected else { throw failure("expected '\(word)'") }
            index += 1
        }
    }

    // MARK: Helpers

    private var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipWhitespace() {
        while let byte = peek, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { index += 1 }
    }

    private mutating func expectEnd() throws(Failure) {
        skipWhitespace()
        if peek != nil { throw failure("expected the end of the input after the value") }
    }

    private mutating func enter() throws(Failure) {
        depth += 1
        if depth > Self.maximumDepth { throw failure("expected at most \(Self.maximumDepth) levels of nesting") }
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        isDigit(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
    }

    private func failure(_ problem: String) -> Failure {
        var line = 1
        var lineStart = 0
        for position in 0..<min(index, bytes.count) where bytes[position] == 0x0A {
            line += 1
            lineStart = position + 1
        }
        // Columns count characters, not bytes, so a mistake after "é" is reported where it is seen.
        let column = String(decoding: bytes[lineStart..<min(index, bytes.count)], as: UTF8.self).count + 1
        let found: String
        if index >= bytes.count {
            found = "the end of the input"
        } else {
            let rest = String(decoding: bytes[index..<min(index + 4, bytes.count)], as: UTF8.self)
            let character = rest.first.map(String.init) ?? "?"
            found =
                character.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F })
                ? "'\(character)'" : "a control character"
        }
        return Failure(problem: problem, line: line, column: column, found: found)
    }
}

#endif
