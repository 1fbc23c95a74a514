import Foundation

/// A data file read and checked, whose index (``IndexState/entries``) is not built yet.
///
/// Opening a store checks every record as it always did (frame, checksum, sequence) and notes
/// where each operation's key and value lie in the file's bytes, but builds no index:
/// hashing and inserting every key was most of an open. The index is built on a background queue
/// right after the open (see ``Engine/buildIndexSoon()``), or by the first use that needs it
/// (a commit, a catch-up, a reload, anything that lists or changes keys), whichever comes first;
/// a store of more than ``walkLimit`` operations builds it during the open, as before.
/// A read before then looks its key up here (``value(forKey:)``), from the last operation back.
///
/// Immutable, so it can be built from on another thread while the engine's lock is free.
final class PendingIndex: Sendable {
    /// One operation of the file, in file order; a record that clears the store first is a
    /// ``Kind/clear`` before its own operations.
    struct Operation {
        enum Kind {
            /// A put; one that `expires` holds its deadline in the 8 bytes after its key.
            case put(ValueKind, expires: Bool)
            case remove
            case clear
        }

        var keyStart: Int
        var keyCount: Int
        var valueStart: Int
        var valueCount: Int
        var kind: Kind
    }

    /// The whole file, header included; values are slices of it.
    let buffer: Data
    let operations: [Operation]

    /// A lookup before the index exists walks the operations; a store with more than this many
    /// builds its index at the open instead (a walk of 100,000 would cost more than the wait for
    /// the build it stands in for).
    static let walkLimit = 4_096

    init(buffer: Data, operations: [Operation]) {
        self.buffer = buffer
        self.operations = operations
    }

    /// Whether lookups should walk the operations rather than build the index.
    var isWalkable: Bool { operations.count <= Self.walkLimit }

    /// The value `key` holds in the file, or `nil` when it holds none (never stored, removed, or
    /// cleared since).
    func value(forKey name: String) -> StoredValue? {
        var name = name
        return name.withUTF8 { wanted -> StoredValue? in
            buffer.withUnsafeBytes { raw -> StoredValue? in
                for operation in operations.reversed() {
                    if case .clear = operation.kind { return nil }
                    guard operation.keyCount == wanted.count,
                        Self.equal(self.key(of: operation, in: raw), UnsafeRawBufferPointer(wanted))
                    else { continue }
                    guard case .put(let kind, let expires) = operation.kind else { return nil }
                    return StoredValue(
                        self.value(of: operation), kind: kind,
                        deadline: expires ? Self.deadline(of: operation, in: raw) : nil)
                }
                return nil
            }
        }
    }

    /// The index the file's operations make, versions numbered on from `version`.
    ///
    /// NB: values stay slices of the file's buffer, unless most of the file is dead records:
    /// then they are copied out, so the buffer can go.
    func build(numberingFrom version: UInt64) -> (entries: EntryIndex, liveBytes: Int, nextVersion: UInt64) {
        var entries = EntryIndex()
        entries.reserveCapacity(operations.count)
        var liveBytes = LogFormat.headerSize
        var nextVersion = version
        buffer.withUnsafeBytes { raw in
            for operation in operations {
                switch operation.kind {
                case .clear:
                    entries.removeAll(keepingCapacity: true)
                    liveBytes = LogFormat.headerSize
                case .remove:
                    let key = LogScanner.makeKey(self.key(of: operation, in: raw))
                    guard let old = entries.removeValue(forKey: key) else { continue }
                    liveBytes -= IndexState.recordSize(key, old)
                case .put(let kind, let expires):
                    let key = LogScanner.makeKey(self.key(of: operation, in: raw))
                    nextVersion &+= 1
                    let entry = CachedEntry(
                        bytes: ValueBytes(value(of: operation)), version: nextVersion, kind: kind,
                        deadline: expires ? Self.deadline(of: operation, in: raw) : nil)
                    if let old = entries.updateValue(entry, forKey: key) {
                        liveBytes -= IndexState.recordSize(key, old)
                    }
                    liveBytes += LogCommit.putRecordSize(
                        keyLength: operation.keyCount, valueLength: operation.valueCount, expires: expires)
                }
            }
        }
        if liveBytes * 2 < buffer.count {
            for position in entries.indices {
                entries[entryAt: position].bytes = entries[entryAt: position].bytes.detached()
            }
        }
        return (entries, liveBytes, nextVersion)
    }

    private static func equal(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        guard let first = a.baseAddress, let second = b.baseAddress else { return a.count == 0 }
        return memcmp(first, second, a.count) == 0
    }

    private func key(of operation: Operation, in raw: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: raw[operation.keyStart..<operation.keyStart + operation.keyCount])
    }

    /// The deadline of an expiring put: the 8 bytes after its key (the scanner checked them).
    private static func deadline(of operation: Operation, in raw: UnsafeRawBufferPointer) -> Deadline? {
        Deadline(milliseconds: raw.loadLittleEndian(UInt64.self, at: operation.keyStart + operation.keyCount))
    }

    private func value(of operation: Operation) -> Data {
        buffer[operation.valueStart..<operation.valueStart + operation.valueCount]
    }
}
