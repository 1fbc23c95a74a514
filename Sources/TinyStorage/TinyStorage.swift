public import Foundation
import Observation

/// A small, fast key-value store for `Codable` values, kept in a plain file, that never invents
/// a value, never overwrites data it could not read, and never loses a write it acknowledged.
///
/// ```swift
/// let storage = TinyStorage(insideDirectory: .applicationSupportDirectory, name: "settings")
/// storage.store(365, forKey: "streak")
/// let streak = storage.retrieve(type: Int.self, forKey: "streak")  // 365
/// ```
///
/// Each store lives in its own folder, `insideDirectory/name/`. Every `store`, `remove`,
/// `bulkStore` and `reset` is one atomic commit appended to the data file; reads are answered from
/// memory. Any number of threads and processes may use the same store at once.
///
/// When the file cannot be read (permissions, a missing volume, data protection before the first
/// unlock…) the store is *unavailable*: ``availability`` says why, the throwing methods throw
/// `.unavailable`, the non-throwing ones log an error and return `nil`, and writes are refused.
/// The store becomes available again by itself on the next access once the file can be read.
///
/// Changes are announced on the main queue, as the original library does:
/// ``didChangeNotification`` is posted and Observation is signalled there, in commit order, one
/// notification per commit. The main queue is the main actor's: in an app it runs on the main
/// thread; in an `async` `@main` on Linux it runs on another thread (`Thread.isMainThread` is
/// `false` there, `MainActor.assumeIsolated` holds). A process that never runs the main queue (a
/// daemon, a command-line tool) names another queue with `notificationQueue`, or follows
/// ``values(forKey:as:)``, whose streams do not depend on any particular thread.
public final class TinyStorage: Sendable {
    /// The store's data file, `insideDirectory/name/store.tinystorage`.
    public var fileURL: URL { engine.location.dataFile }
    /// The folder that holds the store's files, `insideDirectory/name/`.
    public var directoryURL: URL { engine.location.directory }
    /// How far each commit has travelled when a write returns.
    public let durability: Durability

    let engine: Engine
    let logger: LogSink
    /// Per-key Observation tracking (see TinyStorage+Observation.swift).
    let registrar = ObservationRegistrar()
    /// Keys read through Observation-tracked APIs: the only ones whose changes are reported to it.
    let observedKeys = Locked<Set<String>>([])
    /// Live `values(forKey:as:)` streams.
    let subscribers = Locked<[UUID: ValueSubscriber]>([:])
    /// Values read in an older shape and written back (see TinyStorage+TypeMigration.swift).
    let typeMigrations = Locked<[TypeMigrationReport]>([])
    /// Data losses the throwing reads have not reported yet (see TinyStorage+DataLoss.swift).
    let unreportedDataLoss = Locked(UnreportedDataLoss())

    /// Opens the store named `name` inside `insideDirectory`, creating it when it does not exist.
    ///
    /// Never throws and never fails: if the store cannot be opened, it reports that through
    /// ``availability`` and the throwing methods, and retries on each access.
    ///
    /// ```swift
    /// // An app: changes are announced on the main queue (the main actor's).
    /// let storage = TinyStorage(insideDirectory: support, name: "settings")
    /// // A daemon with no main run loop: announced on a queue of its own.
    /// let shared = TinyStorage(
    ///     insideDirectory: support, name: "settings",
    ///     notificationQueue: DispatchQueue(label: "settings-changes"))
    /// ```
    ///
    /// - Parameters:
    ///   - insideDirectory: The directory that holds the store's folder, created if missing.
    ///   - name: The store's folder name: not empty, not `.` or `..`, without `/` or NUL.
    ///   - durability: ``Durability/standard`` (survives a process crash; the default) or
    ///     ``Durability/immediate`` (survives power loss).
    ///   - access: ``Access/readWrite`` (the default), or ``Access/readOnly`` to read a store this
    ///     process may not (or must not) write: nothing is created or written, writes throw.
    ///   - readableBy: Who besides the owner may read the folder and files the store creates:
    ///     ``Readers/ownerOnly`` (the default), ``Readers/ownerAndGroup`` or ``Readers/everyone``.
    ///   - notificationQueue: Where ``didChangeNotification`` is posted and Observation is
    ///     signalled: the main queue by default. Pass another queue in a process whose main
    ///     thread does not run a run loop or `dispatchMain()`, or changes are never announced
    ///     there. A concurrent queue still receives them one at a time, in commit order.
    ///   - logger: Where errors and recoveries are reported.
    public convenience init(
        insideDirectory: URL, name: String, durability: Durability = .standard, access: Access = .readWrite,
        readableBy readers: Readers = .ownerOnly, notificationQueue: DispatchQueue = .main,
        logger: any TinyStorageLogging = TinyStorage.defaultLogger
    ) {
        var options = Engine.Options()
        options.readOnly = access == .readOnly
        options.sharedReading = readers.sharedReading
        self.init(
            insideDirectory: insideDirectory, name: name, durability: durability, io: .system,
            notificationQueue: notificationQueue, logger: logger, options: options)
    }

    /// Opens a store whose system calls go through `io`, so tests can inject faults or run it on
    /// a simulated disk (with `options` making it deterministic there).
    init(
        insideDirectory: URL, name: String, durability: Durability, io: FileIO,
        notificationQueue: DispatchQueue = .main, logger: any TinyStorageLogging, inMemory: Bool = false,
        options: Engine.Options = Engine.Options()
    ) {
        let location = StoreLocation(insideDirectory: insideDirectory, name: name)
        var nameError: TinyStorageError?
        do throws(TinyStorageError) { try StoreLocation.validate(name: name) } catch { nameError = error }
        self.durability = durability
        self.logger = LogSink(logger)
        engine = Engine(
            location: location, nameError: inMemory ? nil : nameError, durability: durability, io: io,
            logger: logger, inMemory: inMemory, options: options, announcingOn: notificationQueue)
        engine.setListener(self)
    }

    /// A store that lives only in memory, for tests and SwiftUI previews.
    ///
    /// It has the same API and behaviour as a file-backed store — atomic commits, typed errors,
    /// notifications, Observation, value streams — but touches no file: its ``fileURL`` points
    /// nowhere and its contents vanish with the instance. Each call returns a new, empty store.
    ///
    /// ```swift
    /// let storage = TinyStorage.inMemory()
    /// storage.store(3, forKey: "launches")
    /// ```
    ///
    /// - Parameters:
    ///   - name: A name for log messages.
    ///   - notificationQueue: Where changes are announced, as for
    ///     ``init(insideDirectory:name:durability:access:readableBy:notificationQueue:logger:)``: the main queue by default.
    ///   - logger: Where errors are reported.
    public static func inMemory(
        name: String = "in-memory", notificationQueue: DispatchQueue = .main,
        logger: any TinyStorageLogging = TinyStorage.defaultLogger
    ) -> TinyStorage {
        TinyStorage(
            insideDirectory: URL(fileURLWithPath: "/dev/null/tinystorage-in-memory"), name: name,
            durability: .standard, io: .system, notificationQueue: notificationQueue, logger: logger, inMemory: true)
    }

    /// Ends the instance's change streams. A `.standard` commit's background flush still runs, as
    /// the commit was promised: up to a second after the last commit it flushes the data file and
    /// writes the durable mark into the file's header, a second later it flushes that mark, then
    /// nothing more runs and the file is closed. After ``synchronize()`` it has nothing to write.
    deinit {
        let finishing = subscribers.withLock { $0.values }
        for subscriber in finishing { subscriber.finish() }
    }

    // MARK: Reading (typed reads are in TinyStorage+Reading.swift)

    /// Whether a value is stored for `key` (a value that has expired is not). `false`, after
    /// logging an error, when the store is unavailable.
    public func contains(_ key: any TinyStorageKey) -> Bool {
        logging { () throws(TinyStorageError) in
            let name = try Self.validatedName(of: key)
            return try engine.withLiveEntries { $0[name] != nil }
        } ?? false
    }

    /// Every key that holds a value (values that have expired left out), in no particular order.
    /// Empty, after logging an error, when the store is unavailable.
    public var allKeys: [any TinyStorageKey] {
        logging { () throws(TinyStorageError) in try engine.withLiveEntries { $0.keys } } ?? []
    }

    // MARK: Writing

    /// Stores `value` for `key` in one atomic commit; `nil` removes the key.
    ///
    /// A `Data` value is stored as its raw bytes, as the original library does; any other value
    /// as JSON. Logs an error and changes nothing when the value cannot be encoded, the key or
    /// writeID is invalid, or the store is unavailable; use ``storeOrThrow(_:forKey:writeID:)`` to
    /// handle those cases. Storing the bytes a key already holds changes nothing and announces nothing.
    ///
    /// ```swift
    /// storage.store(365, forKey: "streak", writeID: "sync-42")
    /// ```
    ///
    /// - Parameters:
    ///   - value: The value to store; `nil` (or an optional holding `nil`) removes the key.
    ///   - key: Where to store it.
    ///   - writeID: Passed on in ``didChangeNotification`` (`userInfo[writeIDUserInfoKey]`) so an
    ///     observer can recognize its own writes, also in other processes. At most
    ///     ``maximumWriteIDLength`` bytes of UTF-8.
    public func store(_ value: (any Encodable)?, forKey key: any TinyStorageKey, writeID: String? = nil) {
        logging { () throws(TinyStorageError) in try write(value, forKey: key, writeID: writeID) }
    }

    /// Stores `value` for `key` in one atomic commit; `nil` removes the key.
    ///
    /// ```swift
    /// do {
    ///     try storage.storeOrThrow(profile, forKey: "profile")
    /// } catch let error as ProfileError {
    ///     // Thrown by Profile's own encode(to:), unchanged.
    /// }
    /// ```
    ///
    /// - Throws: The error the value's `encode(to:)` (or `JSONEncoder`) threw, unchanged, as the
    ///   original library does (see ``TinyStorageError`` for which calls rethrow and which wrap).
    ///   Otherwise a ``TinyStorageError``: `.unavailable`, `.valueTooLarge`, `.invalidKey`,
    ///   `.invalidWriteID`, `.noSpace`, `.permissionDenied`, `.io`. When it throws, nothing was written.
    public func storeOrThrow(_ value: (any Encodable)?, forKey key: any TinyStorageKey, writeID: String? = nil) throws {
        do {
            try write(value, forKey: key, writeID: writeID)
        } catch {
            throw Self.asOriginalLibraryThrowsIt(error)
        }
    }

    /// Removes the value for `key`, if any, in one atomic commit. Logs an error on failure.
    ///
    /// ```swift
    /// storage.remove(key: "streak")
    /// ```
    ///
    /// - Parameters:
    ///   - key: The key to remove.
    ///   - writeID: Passed on in ``didChangeNotification``; at most ``maximumWriteIDLength`` bytes.
    public func remove(key: any TinyStorageKey, writeID: String? = nil) {
        logging { () throws(TinyStorageError) in try write(nil, forKey: key, writeID: writeID) }
    }

    /// Removes every key in one atomic commit. Logs an error on failure.
    ///
    /// Unlike the original library, which deletes its file, this appends a "clear everything"
    /// commit: other processes see it like any other change, and a store that could not be read
    /// is never cleared.
    ///
    /// - Parameter writeID: Passed on in ``didChangeNotification``; at most ``maximumWriteIDLength`` bytes.
    public func reset(writeID: String? = nil) {
        logging { () throws(TinyStorageError) in try removeAll(writeID: writeID) }
    }

    /// Removes every key in one atomic commit.
    ///
    /// - Parameter writeID: Passed on in ``didChangeNotification``; at most ``maximumWriteIDLength`` bytes.
    /// - Throws: `.unavailable` (the store is not cleared: a store that could not be read is never
    ///   overwritten), `.invalidWriteID`, or a file-system error.
    public func resetOrThrow(writeID: String? = nil) throws {
        try removeAll(writeID: writeID)
    }

    // MARK: Internals

    /// ``resetOrThrow(writeID:)``, with its error type known to the callers inside TinyStorage.
    func removeAll(writeID: String?) throws(TinyStorageError) {
        let writeID = try Self.validatedWriteID(writeID)
        try engine.commit { entries in
            Engine.Plan(
                commit: entries.isEmpty ? nil : LogCommit(clearsFirst: true, writeID: writeID, operations: []),
                result: ())
        }
    }

    /// Stores `value` for `key` (removes it for `nil`), expiring after `lifetime` when given.
    func write(
        _ value: (any Encodable)?, forKey key: some TinyStorageKey, writeID: String?,
        expiresAfter lifetime: Duration? = nil
    ) throws(TinyStorageError) {
        let name = try Self.validatedName(of: key)
        let writeID = try Self.validatedWriteID(writeID)
        guard let lifetime else {
            return try engine.commitSingleKey(
                Self.encodedUnlessNil(value, forKey: name), forKey: name, writeID: writeID)
        }
        let deadline = try deadline(after: lifetime)
        var stored = try Self.encodedUnlessNil(value, forKey: name)
        stored?.deadline = deadline
        try engine.commitSingleKey(stored, forKey: name, writeID: writeID)
    }

    /// What the original library's `storeOrThrow` throws for `error`: the encoder's own error
    /// (apps catch their own types), anything else as it is.
    static func asOriginalLibraryThrowsIt(_ error: TinyStorageError) -> any Error {
        guard error.code == .encodingFailed, let cause = error.underlying else { return error }
        return cause
    }

    /// The value's encoding, or `nil` for `nil` (also an optional holding `nil`): a removal.
    ///
    /// NB: the existential is opened where the caller put it, not copied out first. `guard let`
    /// copies it through `Optional`'s generic value witnesses, and that copy and its destruction
    /// were an eighth of the instructions an `Int` overwrite spends before the engine (about
    /// 100 of them). A non-`nil` `Optional<any Encodable>` is its payload, unchanged, at offset 0,
    /// with `nil` kept in a value the existential's metadata pointer cannot take, so the two
    /// types have the same size and the memory can be read as the payload.
    static func encodedUnlessNil(
        _ value: (any Encodable)?, forKey name: String
    ) throws(TinyStorageError) -> StoredValue? {
        guard value != nil else { return nil }
        return try withUnsafePointer(to: value) { optional throws(TinyStorageError) in
            try optional.withMemoryRebound(to: (any Encodable).self, capacity: 1) { value throws(TinyStorageError) in
                try ValueCoding.encodeUnlessNil(value.pointee, forKey: name)
            }
        }
    }

    /// Runs `body`, logging and swallowing its error: the non-throwing API's contract.
    func logging<R>(_ body: () throws(TinyStorageError) -> R) -> R? {
        do {
            return try body()
        } catch {
            report(error)
            return nil
        }
    }

}
