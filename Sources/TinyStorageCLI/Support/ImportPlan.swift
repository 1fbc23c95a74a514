// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import Foundation
import TinyStorage

/// What `import-userdefaults` does with each key of its source: checked and encoded before the
/// store is opened, then narrowed against what the store holds, then written in one commit.
struct ImportPlan {
    /// A key's outcome, for the summary.
    enum Outcome {
        case migrated(kind: String)
        case skipped(String)
        case failed(String)
    }

    let sourceName: String
    let overwrite: Bool
    private(set) var outcomes: [String: Outcome] = [:]
    /// The encoded values still to be written.
    private(set) var items: [String: StoredValue] = [:]

    init(source: ImportUserDefaultsCommand.Source, overwrite: Bool) {
        sourceName = source.name
        self.overwrite = overwrite
        for (key, object) in source.values {
            if let problem = Self.keyProblem(key) {
                outcomes[key] = .failed(problem)
                continue
            }
            // NB: the library's own conversion, so a key imports exactly as `migrate` stores it.
            switch TinyStorage.migrationEncoding(of: object) {
            case .encoded(let value, let typeName):
                outcomes[key] = .migrated(kind: typeName)
                items[key] = value
            case .refused(.nestedCollection):
                outcomes[key] = .skipped(
                    "a nested collection (an array or dictionary inside another), which is not supported")
            case .refused(.unsupportedType):
                outcomes[key] = .skipped(
                    "a value of a type that is not a property-list type, or an integer larger than Int")
            case .refused(.valueTooLarge):
                outcomes[key] = .failed("it is over the \(TinyStorage.maximumValueSize)-byte limit as JSON")
            case .refused:
                outcomes[key] = .failed("a number that is not finite (NaN or infinity), which JSON cannot hold")
            }
        }
    }

    /// Whether any key is left to write.
    var hasCandidates: Bool { !items.isEmpty }

    /// Drops the values the store already holds: identical ones need no write; different ones
    /// are kept unless `overwrite`.
    mutating func keepExisting(_ entries: [String: StoredValue]) {
        for (key, value) in items {
            guard let stored = entries[key] else { continue }
            if stored == value {
                items[key] = nil
            } else if !overwrite {
                items[key] = nil
                outcomes[key] = .skipped("the store already holds another value; --overwrite replaces it")
            }
        }
    }

    /// One line per key, sorted, then a summary line.
    func summary(storePath: String) -> String {
        var migrated = 0
        var skipped = 0
        var failed = 0
        var lines: [String] = []
        for key in outcomes.keys.sorted() {
            let quoted = JSONText.quoted(key)
            switch outcomes[key] {
            case .migrated(let kind):
                migrated += 1
                lines.append("migrated  \(quoted) (\(kind))")
            case .skipped(let reason):
                skipped += 1
                lines.append("skipped   \(quoted): \(reason)")
            case .failed(let reason):
                failed += 1
                lines.append("failed    \(quoted): \(reason)")
            case nil: break
            }
        }
        if outcomes.isEmpty {
            lines.append("\(sourceName) holds no keys; nothing was written.")
        } else {
            let written = items.isEmpty ? "nothing was written" : "\(items.count) written in one commit"
            lines.append(
                "imported \(migrated) of \(outcomes.count) keys from \(sourceName) into '\(storePath)' (\(written)); "
                    + "\(skipped) skipped, \(failed) failed")
        }
        return lines.map { $0 + "\n" }.joined()
    }

    private static func keyProblem(_ key: String) -> String? {
        if key.isEmpty { return "an empty key, which TinyStorage does not accept" }
        if key.utf8.contains(0) { return "a key with a NUL character, which TinyStorage does not accept" }
        if key.utf8.count > TinyStorage.maximumKeyLength {
            return "a key of \(key.utf8.count) bytes; the limit is \(TinyStorage.maximumKeyLength)"
        }
        return nil
    }
}

#endif
