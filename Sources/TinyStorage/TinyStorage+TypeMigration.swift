import Foundation

// The slow path of a read: a stored value that does not decode as the type asked for. A typed key
// may declare older shapes (Key+Migrations.swift); a read that finds one converts it and writes it
// back, compare-and-commit, like `update`. Nothing here runs for a value that decodes.
extension TinyStorage {
    /// Reads `stored`, which did not decode as `T` (`failure`), through the older shapes `key`
    /// declares, and writes an upgraded value back.
    ///
    /// - Throws: `.decodingFailed` saying, for each type tried, where and why it failed.
    func readOlderShape<T>(
        of stored: StoredValue, as type: T.Type, key: any TinyStorageKey, name: String, failure: TinyStorageError
    ) throws(TinyStorageError) -> T {
        let (value, upgrade) = try Self.decodeOlderShape(
            of: stored, as: type, key: key, name: name, failure: failure)
        writeBack(upgrade, replacing: stored, forKey: name)
        return value
    }

    /// Decodes `stored` as `T`, or through the older shapes `key` declares for `T` when it is not
    /// a `T`; the upgrade, when there was one, is not written back.
    ///
    /// - Throws: `.decodingFailed` saying, for each type tried, where and why it failed.
    static func decode<T: Decodable>(
        _ type: T.Type, from stored: StoredValue, key: any TinyStorageKey, name: String
    ) throws(TinyStorageError) -> (value: T, upgrade: TypeUpgrade?) {
        do throws(TinyStorageError) {
            return (try ValueCoding.decode(T.self, from: stored, forKey: name), nil)
        } catch {
            let (value, upgrade) = try decodeOlderShape(of: stored, as: type, key: key, name: name, failure: error)
            return (value, upgrade)
        }
    }

    private static func decodeOlderShape<T>(
        of stored: StoredValue, as type: T.Type, key: any TinyStorageKey, name: String, failure: TinyStorageError
    ) throws(TinyStorageError) -> (value: T, upgrade: TypeUpgrade) {
        guard let migrating = key as? any TypeMigratingKey,
            let upgraded = try migrating.readOlderShape(stored, as: T.self, name: name, failure: failure)
        else {
            throw DecodingFailure.error(
                forKey: name, stored: stored, failures: [DecodingFailure(typeName: "\(T.self)", error: failure)])
        }
        return upgraded
    }

    /// Writes an upgraded value back in its current shape, in one commit, if the key still holds
    /// `stored`: a value written meanwhile (perhaps by a newer version of the app) wins. Never
    /// throws: the read that upgraded has its value, and the next read upgrades again.
    func writeBack(_ upgrade: TypeUpgrade, replacing stored: StoredValue, forKey name: String) {
        let what = "\"\(name)\", stored as \(upgrade.olderTypeName), was read as \(upgrade.currentTypeName)"
        var rewritten: StoredValue
        switch upgrade.writeBack {
        case .skip(let reason):
            logger.log(.notice, "\(what) but not written back: \(reason).")
            return
        case .write(let value):
            rewritten = value
        }
        if engine.options.readOnly {
            logger.log(.debug, "\(what); not written back: the store is open read-only.")
            return
        }
        // NB: an upgraded value keeps its deadline: the shape changes, not how long it lives.
        rewritten.deadline = stored.deadline
        do throws(TinyStorageError) {
            let wrote = try engine.commit { entries in
                guard entries[name]?.stored == stored, rewritten != stored else {
                    return Engine.Plan(commit: nil, result: false)
                }
                let operation = LogOperation.setting(name, to: rewritten)
                return Engine.Plan(commit: LogCommit(writeID: nil, operations: [operation]), result: true)
            }
            if wrote {
                noteTypeMigration(of: name, upgrade)
            } else {
                logger.log(.debug, "\(what); it changed before the upgrade was written back, so it was not.")
            }
        } catch {
            logger.log(
                .warning, "\(what) but could not be written back; the next read upgrades it again. \(error)")
        }
    }

    /// Keeps and logs the report of an upgrade written back.
    func noteTypeMigration(of name: String, _ upgrade: TypeUpgrade) {
        let report = TypeMigrationReport(
            date: Date(), key: name, fromType: upgrade.olderTypeName, toType: upgrade.currentTypeName)
        typeMigrations.withLock { reports in
            reports.append(report)
            if reports.count > Self.maximumTypeMigrationReports {
                reports.removeFirst(reports.count - Self.maximumTypeMigrationReports)
            }
        }
        logger.log(.info, "\(report) It is stored in the current shape now.")
    }
}
