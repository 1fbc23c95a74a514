import Foundation
import GRDB

/// The SQLite competitor: `kv(key TEXT PRIMARY KEY, value BLOB)` in WAL mode, through GRDB.
///
/// NB: every call uses GRDB's fastest honest path, so the comparison flatters SQLite rather than
/// TinyStorage: statements are prepared once and cached, and each write is one autocommit
/// statement (its own transaction and commit, without an explicit BEGIN/COMMIT round trip).
final class SQLiteKV {
    enum Synchronous: String {
        /// WAL + NORMAL: commits survive a process crash, not a power loss (no fsync per commit).
        case normal = "NORMAL"
        /// WAL + FULL: the WAL is synced at every commit, so commits survive a power loss.
        case full = "FULL"
    }

    let queue: DatabaseQueue

    /// Opens (creating if needed) the database at `path`; with `createTable`, also switches it to
    /// WAL (a setting the file keeps) and creates `kv`.
    ///
    /// - Throws: when SQLite does not end up in WAL mode with the requested `synchronous` level.
    init(path: String, synchronous: Synchronous = .normal, createTable: Bool = true) throws {
        var configuration = Configuration()
        // NB: not `configuration.journalMode = .wal`: GRDB then forces `synchronous = NORMAL`
        // after `prepareDatabase` runs, which would silently turn the FULL benchmark into NORMAL.
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = \(synchronous.rawValue)") }
        queue = try DatabaseQueue(path: path, configuration: configuration)
        if createTable {
            try queue.inDatabase { db in
                _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
                try db.execute(sql: "CREATE TABLE IF NOT EXISTS kv(key TEXT PRIMARY KEY, value BLOB)")
                let journalMode = try String.fetchOne(db, sql: "PRAGMA journal_mode")
                let level = try Int.fetchOne(db, sql: "PRAGMA synchronous")
                guard journalMode == "wal", level == (synchronous == .full ? 2 : 1) else {
                    throw DatabaseError(
                        message: "expected WAL + \(synchronous.rawValue), got \(journalMode ?? "?") + \(level ?? -1)")
                }
            }
        }
    }

    /// Inserts or replaces one value: one commit.
    func store(_ value: Data, forKey key: String) throws {
        try queue.inDatabase { db in
            try db.cachedStatement(
                sql: "INSERT INTO kv(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"
            ).execute(arguments: [key, value])
        }
    }

    /// The value stored for `key`, if any.
    func value(forKey key: String) throws -> Data? {
        try queue.inDatabase { db in
            try Data.fetchOne(db.cachedStatement(sql: "SELECT value FROM kv WHERE key = ?"), arguments: [key])
        }
    }

    /// Stores every pair in one transaction, then checkpoints so the WAL starts empty.
    func prefill(_ items: [(key: String, value: Data)]) throws {
        try queue.inTransaction { db in
            let statement = try db.makeStatement(sql: "INSERT OR REPLACE INTO kv(key, value) VALUES (?, ?)")
            for item in items { try statement.execute(arguments: [item.key, item.value]) }
            return .commit
        }
        _ = try queue.inDatabase { db in try db.checkpoint(.truncate) }
    }
}

extension SQLiteKV {
    /// `count` profiles under `key-000000`…, JSON-encoded.
    static func profiles(_ count: Int) -> [(key: String, value: Data)] {
        (0..<count).map { (Keys.key($0), JSON.encode(Profile.sample($0))) }
    }

    /// `count` integers under `key-000000`…, JSON-encoded.
    static func integers(_ count: Int) -> [(key: String, value: Data)] {
        (0..<count).map { (Keys.key($0), JSON.encode($0)) }
    }
}
