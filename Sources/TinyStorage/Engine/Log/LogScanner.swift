import Foundation

/// Reads records out of untrusted bytes.
///
/// The scanner never trusts a length before checking it against the bytes that exist and the
/// format's maximum, never applies a record whose checksum fails, and stops at the first record
/// it cannot verify, reporting where and why. It never crashes on any input (the fuzz tests feed
/// it random and mutated files).
enum LogScanner {
    /// Why scanning stopped.
    enum Stop: Equatable, Sendable {
        /// The bytes ended cleanly (at the end of the buffer or at zero fill).
        case end
        /// The last record is incomplete: the typical result of a crash in the middle of a write.
        case incomplete(offset: Int)
        /// A record failed its checksum or could not be parsed while more bytes follow it.
        case corrupt(offset: Int, reason: String)

        var offset: Int? {
            switch self {
            case .end: nil
            case .incomplete(let offset), .corrupt(let offset, _): offset
            }
        }
    }

    /// Makes a stored value from its bytes; by default a copy.
    typealias ValueMaker = (UnsafeRawBufferPointer) -> Data

    /// Scans `bytes` from `start`, calling `apply` for each verified commit in order.
    ///
    /// - Parameters:
    ///   - version: The file's format version (from its header): its records must be of that
    ///     version's kind. `nil` accepts the records of every known version.
    ///   - sequencedAfter: In a version 2 file, the sequence number the first record must
    ///     follow: each record's must then be its predecessor's plus one, and a record out of
    ///     sequence (one that survived while an earlier one was lost) stops the scan as damage.
    ///     `nil` checks nothing (version 1 files, salvage).
    /// - Returns: the offset just past the last verified record, and why scanning stopped.
    static func scan(
        _ bytes: UnsafeRawBufferPointer, from start: Int, version: UInt32? = LogFormat.newestVersion,
        sequencedAfter: UInt64? = nil, makeValue: ValueMaker = { Data($0) }, apply: (LogCommit) -> Void
    ) -> (end: Int, stop: Stop) {
        var nextSequence = sequencedAfter.map { $0 &+ 1 }
        var commit = LogCommit(operations: [])
        return walkRecords(bytes, from: start) { payload in
            commit.operations.removeAll(keepingCapacity: true)
            guard parsePayload(payload, version: version, into: &commit, makeValue: makeValue) else {
                return "a malformed record"
            }
            if let reason = checkSequence(commit.sequence, expected: &nextSequence) { return reason }
            apply(commit)
            return nil
        }
    }

    /// One operation of a verified record, as the bytes of the buffer being scanned: valid only
    /// during the call it is handed to.
    struct ScannedOperation {
        /// The key's stored bytes (see ``LogScanner/makeKey(_:)``).
        var key: UnsafeRawBufferPointer
        /// The stored value's bytes; `nil` for a removal.
        var value: UnsafeRawBufferPointer?
        /// How to read `value`.
        var kind: ValueKind
        /// When the value expires (a version 3 put with a deadline); `nil`: never.
        var deadline: Deadline? = nil
    }

    /// Scans like ``scan(_:from:version:sequencedAfter:makeValue:apply:)``, but hands each
    /// record over as it is read: first its head (`record`), then its operations one by one
    /// (`operation`), as bytes of `bytes`, with no commit gathered and no key or value made in
    /// between: the caller makes what it keeps, once.
    ///
    /// A record whose checksum verifies but whose payload turns out malformed part way has had
    /// its head and first operations handed over already: `discard` is then called, before the
    /// scan stops at that record, so the caller can drop what it kept of it. (A record out of
    /// sequence has had nothing handed over: its head is checked before.)
    @inline(__always)
    static func scanOperations(
        _ bytes: UnsafeRawBufferPointer, from start: Int, version: UInt32?, sequencedAfter: UInt64?,
        record: (_ sequence: UInt64, _ clearsFirst: Bool) -> Void, operation: (ScannedOperation) -> Void,
        discard: () -> Void = {}
    ) -> (end: Int, stop: Stop) {
        var nextSequence = sequencedAfter.map { $0 &+ 1 }
        return walkRecords(bytes, from: start) { payload in
            var reader = ByteReader(bytes: payload)
            guard let head = parseHead(&reader, version: version, keepingWriteID: false) else {
                return "a malformed record"
            }
            if let reason = checkSequence(head.sequence, expected: &nextSequence) { return reason }
            record(head.sequence, head.clearsFirst)
            guard
                parseOperations(
                    &reader, kind: head.kind, deadlines: LogFormat.allowsDeadlines(version: version),
                    payloadSize: payload.count, operation: operation)
            else {
                discard()
                return "a malformed record"
            }
            return nil
        }
    }

    /// Scans like ``scan(_:from:version:sequencedAfter:makeValue:apply:)``, but hands each
    /// verified record to `apply` as its writeID and its operations, as bytes of `bytes` (valid
    /// only during the call): no ``LogCommit`` is gathered and no key or value made, so the caller
    /// makes only what it keeps. A record is handed over only once all of it is read and well
    /// formed. Sequence numbers are not checked.
    ///
    /// NB: what the change delivery reads its own commits back with (see
    /// `LoggedChanges.changeSets(everyKey:)`): through ``scan(_:from:version:sequencedAfter:makeValue:apply:)``
    /// each record's value was copied into a `Data` and its commit copied again on the way to
    /// `apply`, which nobody needed: the read-back cost the delivery queue about as much per
    /// commit as the commit cost its own thread.
    static func scanRecords(
        _ bytes: UnsafeRawBufferPointer, from start: Int, version: UInt32? = LogFormat.newestVersion,
        apply: (_ writeID: String?, _ operations: SmallList<ScannedOperation>) -> Void
    ) -> (end: Int, stop: Stop) {
        var operations = SmallList<ScannedOperation>()
        return walkRecords(bytes, from: start) { payload in
            var reader = ByteReader(bytes: payload)
            guard let head = parseHead(&reader, version: version, keepingWriteID: true) else {
                return "a malformed record"
            }
            operations.removeAll(keepingCapacity: true)
            let parsed = parseOperations(
                &reader, kind: head.kind, deadlines: LogFormat.allowsDeadlines(version: version),
                payloadSize: payload.count
            ) { operations.append($0) }
            guard parsed else { return "a malformed record" }
            apply(head.writeID, operations)
            return nil
        }
    }

    /// The records of `bytes` (of a file of `version`, 2 or later, from its start), verified as
    /// ``scan(_:from:version:sequencedAfter:makeValue:apply:)`` verifies them, copied as they are
    /// but for their sequence numbers, which become the ones after `sequence` (left at the last one
    /// given), and their checksums, made again: what a compaction appends of the commits made
    /// while it wrote its snapshot.
    ///
    /// NB: patched in place, not decoded and encoded again, as a compaction did before: under a
    /// steady stream of commits, thousands arrive while the snapshot is flushed, and making a
    /// commit of each, its keys and values, then its bytes again, was four fifths of the
    /// compaction's time. In 600,000 `Int` overwrites, compactions took 23% of the process's
    /// samples, the copy 18%; now 10% and 4% (two checksums and a copy per record). The bytes
    /// are the same: a version 2 record decoded and encoded again differs in those two fields.
    ///
    /// - Returns: `nil` when a record does not verify (or the bytes end inside one).
    static func renumberedCopy(
        of bytes: UnsafeRawBufferPointer, version: UInt32, after sequence: inout UInt64
    ) -> [UInt8]? {
        guard let source = bytes.baseAddress else { return [] }
        var copy = [UInt8](bytes)
        var last = sequence
        let scanned = copy.withUnsafeMutableBytes { copy in
            walkRecords(bytes, from: 0) { payload in
                var reader = ByteReader(bytes: payload)
                guard let head = parseHead(&reader, version: version, keepingWriteID: false),
                    parseOperations(
                        &reader, kind: head.kind, deadlines: LogFormat.allowsDeadlines(version: version),
                        payloadSize: payload.count, operation: { _ in })
                else { return "a malformed record" }
                last &+= 1
                let frame = payload.baseAddress! - source - LogFormat.frameSize
                let payloadStart = frame + LogFormat.frameSize
                copy.storeBytes(
                    of: last.littleEndian, toByteOffset: payloadStart + LogFormat.sequenceOffset, as: UInt64.self)
                let lengthCRC = crc32c(UnsafeRawBufferPointer(rebasing: copy[frame..<frame + 4]))
                let crc = crc32c(
                    UnsafeRawBufferPointer(rebasing: copy[payloadStart..<payloadStart + payload.count]),
                    startingWith: lengthCRC)
                copy.storeBytes(of: crc.littleEndian, toByteOffset: frame + 4, as: UInt32.self)
                return nil
            }
        }
        guard scanned.stop == .end else { return nil }
        sequence = last
        copy.removeSubrange(scanned.end...)
        return copy
    }

    /// Walks the records of `bytes` from `start`, checking each one's frame and checksum, and
    /// hands each verified payload to `body`, which returns why the record is damaged, or `nil`.
    ///
    /// - Returns: the offset just past the last record `body` accepted, and why the walk stopped.
    private static func walkRecords(
        _ bytes: UnsafeRawBufferPointer, from start: Int, body: (UnsafeRawBufferPointer) -> String?
    ) -> (end: Int, stop: Stop) {
        var position = start
        while true {
            let remaining = bytes.count - position
            if remaining == 0 { return (position, .end) }
            if remaining < LogFormat.frameSize {
                return (position, isZero(bytes, from: position) ? .end : .incomplete(offset: position))
            }
            let stated = bytes.loadLittleEndian(UInt32.self, at: position)
            if stated == 0 {
                if isZero(bytes, from: position) { return (position, .end) }
                return (position, .corrupt(offset: position, reason: "a zero length followed by data"))
            }
            // NB: checked before it is used as an `Int`, which has 32 bits on watchOS (arm64_32).
            guard let length = LogFormat.length(stated), length <= LogFormat.maximumPayloadSize else {
                return (position, .corrupt(offset: position, reason: "an impossible record length \(stated)"))
            }
            if length > remaining - LogFormat.frameSize {
                return (position, .incomplete(offset: position))
            }
            let stored = bytes.loadLittleEndian(UInt32.self, at: position + 4)
            let lengthCRC = crc32c(UnsafeRawBufferPointer(rebasing: bytes[position..<position + 4]))
            let payloadStart = position + LogFormat.frameSize
            let payload = UnsafeRawBufferPointer(rebasing: bytes[payloadStart..<payloadStart + length])
            guard crc32c(payload, startingWith: lengthCRC) == stored else {
                return (position, .corrupt(offset: position, reason: "a checksum mismatch"))
            }
            if let reason = body(payload) { return (position, .corrupt(offset: position, reason: reason)) }
            position = payloadStart + length
        }
    }

    /// Checks a record's sequence number against the one expected (`nil`: none), and moves the
    /// expectation on. Returns why the record is out of sequence, or `nil`.
    private static func checkSequence(_ sequence: UInt64, expected: inout UInt64?) -> String? {
        guard let next = expected else { return nil }
        guard sequence == next else { return "a record out of sequence (\(sequence) where \(next) belongs)" }
        expected = next &+ 1
        return nil
    }

    /// Decodes one verified payload of a file of `version` (`nil`: any known version). Returns
    /// `false` when it is malformed: an unknown kind, flag or tag, or lengths that do not add up.
    static func parsePayload(
        _ payload: UnsafeRawBufferPointer, version: UInt32? = LogFormat.newestVersion, into commit: inout LogCommit,
        makeValue: ValueMaker = { Data($0) }
    ) -> Bool {
        var reader = ByteReader(bytes: payload)
        guard let head = parseHead(&reader, version: version, keepingWriteID: true) else { return false }
        commit.clearsFirst = head.clearsFirst
        commit.writeID = head.writeID
        commit.sequence = head.sequence
        return parseOperations(
            &reader, kind: head.kind, deadlines: LogFormat.allowsDeadlines(version: version), payloadSize: payload.count
        ) { operation in
            let key = makeKey(operation.key)
            if let value = operation.value {
                commit.operations.append(
                    .put(key: key, value: makeValue(value), kind: operation.kind, deadline: operation.deadline))
            } else {
                commit.operations.append(.remove(key: key))
            }
        }
    }

    /// What a record's payload says before its operations.
    private struct RecordHead {
        var kind: UInt8
        var clearsFirst: Bool
        var writeID: String?
        /// 0 in version 1 records.
        var sequence: UInt64
    }

    /// Reads a payload's kind, flags, sequence number and writeID; `nil` when they are malformed.
    ///
    /// - Parameter keepingWriteID: Whether to make the writeID's string; without, it is only
    ///   checked and skipped (a string per record is an allocation when no one reads it).
    private static func parseHead(_ reader: inout ByteReader, version: UInt32?, keepingWriteID: Bool) -> RecordHead? {
        guard let kind = reader.byte(), LogFormat.recordKind(version: version).map({ $0 == kind }) ?? true,
            let flags = reader.byte()
        else { return nil }
        var head = RecordHead(kind: kind, clearsFirst: flags & LogFormat.clearFlag != 0, writeID: nil, sequence: 0)
        switch kind {
        case LogFormat.commitKind:
            guard flags & ~(LogFormat.clearFlag | LogFormat.writeIDFlag) == 0, let sequence = reader.uint64() else {
                return nil
            }
            head.sequence = sequence
            if flags & LogFormat.writeIDFlag != 0 {
                guard let length = reader.uint16(), Int(length) <= LogFormat.maximumWriteIDLength,
                    let text = reader.bytes(Int(length))
                else { return nil }
                if keepingWriteID { head.writeID = String(decoding: text, as: UTF8.self) }
            }
        case LogFormat.version1CommitKind:
            guard flags & ~(LogFormat.clearFlag | LogFormat.version1WriteIDFlag) == 0 else { return nil }
            if flags & LogFormat.version1WriteIDFlag != 0 {
                guard let raw = reader.bytes(16) else { return nil }
                guard keepingWriteID else { break }
                var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
                withUnsafeMutableBytes(of: &uuid) { $0.copyMemory(from: raw) }
                // NB: version 1 wrote writeIDs as UUIDs; they read back as the UUID's string.
                head.writeID = UUID(uuid: uuid).uuidString
            }
        default:
            return nil
        }
        return head
    }

    /// Reads the operations that follow a record's head, handing each to `operation`. Returns
    /// `false` when they are malformed, or do not end exactly where the payload does.
    ///
    /// - Parameter deadlines: Whether puts with a deadline (tag 5) may appear: in files of
    ///   version 3, never in older ones, where one is malformed.
    @inline(__always)
    private static func parseOperations(
        _ reader: inout ByteReader, kind: UInt8, deadlines: Bool, payloadSize: Int,
        operation: (ScannedOperation) -> Void
    ) -> Bool {
        guard let count = reader.length(), count <= payloadSize else { return false }
        for _ in 0..<count {
            guard var tag = reader.byte(), let keyLength = reader.length(), let key = reader.bytes(keyLength) else {
                return false
            }
            if tag == LogFormat.removeTag {
                operation(ScannedOperation(key: key, value: nil, kind: .json))
                continue
            }
            var deadline: Deadline?
            if tag == LogFormat.putExpiringTag, kind == LogFormat.commitKind, deadlines {
                // NB: a deadline of 0 is no deadline a writer makes (it is what an entry uses
                // for none): malformed, like an unknown value tag inside.
                guard let milliseconds = reader.uint64(), let stated = Deadline(milliseconds: milliseconds),
                    let valueTag = reader.byte(), valueTag != LogFormat.putExpiringTag
                else { return false }
                deadline = stated
                tag = valueTag
            }
            let valueKind: ValueKind
            switch (kind, tag) {
            case (LogFormat.version1CommitKind, LogFormat.putJSONTag): valueKind = .original
            case (LogFormat.commitKind, _):
                guard let known = LogFormat.valueKind(tag: tag) else { return false }
                valueKind = known
            default: return false
            }
            guard let valueLength = reader.length(), let value = reader.bytes(valueLength) else { return false }
            operation(ScannedOperation(key: key, value: value, kind: valueKind, deadline: deadline))
        }
        return reader.isAtEnd
    }

    /// A key from its stored bytes, invalid UTF-8 repaired as `String(decoding:as:)` repairs it.
    ///
    /// NB: the bytes are copied straight into the string's storage; a key of up to 15 ASCII
    /// bytes (most keys) is then a small string, made with neither an allocation nor a validation
    /// pass. `String(decoding:as:)` validates first, then builds the small string a byte at a
    /// time: together a sixth of an open's instructions.
    @inline(__always)
    static func makeKey(_ bytes: UnsafeRawBufferPointer) -> String {
        String(unsafeUninitializedCapacity: bytes.count) { storage in
            UnsafeMutableRawBufferPointer(storage).copyMemory(from: bytes)
            return bytes.count
        }
    }

    /// Scans like ``scan(_:from:version:makeValue:apply:)`` but does not stop at damage: after a
    /// record that does not verify, it searches forward for the next one that does and carries
    /// on, so every record that verifies is recovered.
    ///
    /// - Parameter version: As for `scan`; `nil` when the header is unreadable.
    /// - Returns: the damaged byte ranges (zero fill at the end is not damage).
    static func salvage(
        _ bytes: UnsafeRawBufferPointer, from start: Int, version: UInt32? = LogFormat.newestVersion,
        apply: (LogCommit) -> Void
    ) -> [Range<Int>] {
        var damaged: [Range<Int>] = []
        var position = start
        while position < bytes.count {
            let scanned = scan(bytes, from: position, version: version, apply: apply)
            guard let damageStart = scanned.stop.offset else { break }
            if let next = nextVerifiableRecord(in: bytes, after: damageStart, version: version) {
                damaged.append(damageStart..<next)
                position = next
            } else {
                var last = bytes.count
                while last > damageStart, bytes[last - 1] == 0 { last -= 1 }
                damaged.append(damageStart..<max(last, damageStart + 1))
                break
            }
        }
        return damaged
    }

    /// The offset of the first record after `offset`, of the kind `version` writes (`nil`: any
    /// known kind), whose frame and checksum verify.
    static func nextVerifiableRecord(
        in bytes: UnsafeRawBufferPointer, after offset: Int, version: UInt32? = LogFormat.newestVersion
    ) -> Int? {
        let expectedKind = LogFormat.recordKind(version: version)
        var candidate = offset + 1
        while candidate + LogFormat.frameSize + 2 <= bytes.count {
            defer { candidate += 1 }
            let payloadStart = candidate + LogFormat.frameSize
            // Cheap filters first: a plausible length, then the payload's kind byte.
            guard let length = LogFormat.length(bytes.loadLittleEndian(UInt32.self, at: candidate)),
                length >= 6, length <= bytes.count - payloadStart
            else { continue }
            let kind = bytes[payloadStart]
            guard
                expectedKind.map({ $0 == kind })
                    ?? (kind == LogFormat.commitKind || kind == LogFormat.version1CommitKind)
            else { continue }
            let lengthCRC = crc32c(UnsafeRawBufferPointer(rebasing: bytes[candidate..<candidate + 4]))
            let payload = UnsafeRawBufferPointer(rebasing: bytes[payloadStart..<payloadStart + length])
            if crc32c(payload, startingWith: lengthCRC) == bytes.loadLittleEndian(UInt32.self, at: candidate + 4) {
                return candidate
            }
        }
        return nil
    }

    /// Keys that a damaged range probably held: its first record parsed without trusting the
    /// checksum. Best effort, for reports only; never applied.
    static func probableKeys(in bytes: UnsafeRawBufferPointer, range: Range<Int>) -> [String] {
        guard range.count > LogFormat.frameSize else { return [] }
        let payloadStart = range.lowerBound + LogFormat.frameSize
        guard let length = LogFormat.length(bytes.loadLittleEndian(UInt32.self, at: range.lowerBound)),
            length > 0, length <= range.upperBound - payloadStart
        else { return [] }
        var commit = LogCommit(operations: [])
        let payload = UnsafeRawBufferPointer(rebasing: bytes[payloadStart..<payloadStart + length])
        guard parsePayload(payload, version: nil, into: &commit) else { return [] }
        return commit.operations.map(\.key)
    }

    /// Whether every byte from `start` on is zero: a word at a time, since on Linux most of a
    /// data file is space allocated ahead of the log (see ``AppendMapping``).
    private static func isZero(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Bool {
        guard let base = bytes.baseAddress, start < bytes.count else { return true }
        var position = start
        let words = (bytes.count - position) / 8
        for _ in 0..<words {
            if base.loadUnaligned(fromByteOffset: position, as: UInt64.self) != 0 { return false }
            position += 8
        }
        while position < bytes.count {
            if base.load(fromByteOffset: position, as: UInt8.self) != 0 { return false }
            position += 1
        }
        return true
    }
}

/// A bounds-checked cursor over untrusted bytes.
private struct ByteReader {
    let bytes: UnsafeRawBufferPointer
    var position = 0

    var isAtEnd: Bool { position == bytes.count }

    mutating func byte() -> UInt8? {
        guard position < bytes.count else { return nil }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func uint16() -> UInt16? { integer() }
    mutating func uint32() -> UInt32? { integer() }
    mutating func uint64() -> UInt64? { integer() }
    /// A `u32` count or length, as an `Int`; `nil` when the bytes end, or when it does not fit an
    /// `Int` (32 bits on watchOS): damage, never a trap.
    mutating func length() -> Int? { uint32().flatMap(LogFormat.length) }

    private mutating func integer<T: FixedWidthInteger>() -> T? {
        let size = MemoryLayout<T>.size
        guard bytes.count - position >= size else { return nil }
        defer { position += size }
        return bytes.loadLittleEndian(T.self, at: position)
    }

    mutating func bytes(_ count: Int) -> UnsafeRawBufferPointer? {
        guard count >= 0, bytes.count - position >= count else { return nil }
        defer { position += count }
        return UnsafeRawBufferPointer(rebasing: bytes[position..<position + count])
    }
}
