import Foundation
public import Observation

extension TinyStorage: Observable {}

extension TinyStorage: EngineListener {
    /// Feeds a batch of commits to the value streams. Runs on the delivery queue, in commit
    /// order, with no lock held, whatever the main thread is doing.
    func engineDidChange(_ changes: [ChangeSet]) {
        let listening = subscribers.withLock { Array($0.values) }
        guard !listening.isEmpty else { return }
        for change in changes {
            for subscriber in listening where subscriber.startAfter < change.sequence {
                if let receiveChange = subscriber.receiveChange {
                    receiveChange(change)
                } else if let index = change.keys.firstIndex(of: subscriber.key), index < change.values.count {
                    subscriber.receive(change.values[index])
                }
            }
        }
    }

    /// Announces a batch of commits, one by one: Observation readers of the changed keys, then
    /// the notification. Runs on the announcing queue (the main queue unless the store was given
    /// another), in commit order, with no lock held.
    func engineDidAnnounce(_ changes: [ChangeSet]) {
        for change in changes {
            // NB: forming `\.[observedKey: key]` costs a key-path instantiation (~2,000
            // instructions), so only keys someone has observed get a mutation.
            let observed = observedKeys.withLock { keys in keys.isEmpty ? [] : change.keys.filter(keys.contains) }
            for key in observed {
                registrar.withMutation(of: self, keyPath: \.[observedKey: key]) {}
            }
            postDidChange(change)
        }
    }

    /// One observable "property" per stored key, so a change to one key invalidates only the
    /// views and computations that read that key.
    subscript(observedKey key: String) -> Int { 0 }

    /// Records an Observation access to `key` for whoever is tracking.
    func observeAccess(to key: String) {
        observedKeys.withLock { _ = $0.insert(key) }
        registrar.access(self, keyPath: \.[observedKey: key])
    }
}

extension TinyStorage {
    /// Like ``retrieve(type:forKey:)-64we2``, and also tells Observation (and so SwiftUI) that the
    /// caller depends on `key`: a change to that key — from this process or another — re-runs the
    /// view or computation; changes to other keys do not. The change is signalled on the main
    /// queue, the main actor's (or the store's `notificationQueue`), so an `onChange` handler runs there.
    ///
    /// ```swift
    /// var body: some View {
    ///     Text("\(storage.autoUpdatingRetrieve(type: Int.self, forKey: "streak") ?? 0) days")
    /// }
    /// ```
    @MainActor
    public func autoUpdatingRetrieve<T: Decodable & Sendable>(type: T.Type, forKey key: any TinyStorageKey) -> T? {
        observeAccess(to: key.rawValue)
        return retrieve(type: type, forKey: key)
    }

    /// Like ``autoUpdatingRetrieve(type:forKey:)-8ekco``, for a type that is not `Sendable`
    /// (decoded on every read).
    @MainActor
    public func autoUpdatingRetrieve<T: Decodable>(type: T.Type, forKey key: any TinyStorageKey) -> T? {
        observeAccess(to: key.rawValue)
        return retrieve(type: type, forKey: key)
    }

    /// Like ``retrieveOrThrow(type:forKey:)-1m0vx``, and also registers an Observation dependency
    /// on `key`, as ``autoUpdatingRetrieve(type:forKey:)-8ekco``.
    ///
    /// - Throws: `.unavailable`, `.decodingFailed`, `.invalidKey`.
    @MainActor
    public func autoUpdatingRetrieveOrThrow<T: Decodable & Sendable>(
        type: T.Type, forKey key: any TinyStorageKey
    ) throws -> T? {
        observeAccess(to: key.rawValue)
        return try retrieveOrThrow(type: type, forKey: key)
    }

    /// Like `autoUpdatingRetrieveOrThrow(type:forKey:)` above, for a type that is not `Sendable`
    /// (decoded on every read).
    ///
    /// - Throws: `.unavailable`, `.decodingFailed`, `.invalidKey`.
    @MainActor
    public func autoUpdatingRetrieveOrThrow<T: Decodable>(type: T.Type, forKey key: any TinyStorageKey) throws -> T? {
        observeAccess(to: key.rawValue)
        return try retrieveOrThrow(type: type, forKey: key)
    }

    /// The value for `key` now, then after every change to it, from this process or another, in
    /// commit order. `nil` means the key is absent. Unlike notifications, values are handed over
    /// from a queue of the store's own, so a stream works in any process, main thread or not.
    ///
    /// ```swift
    /// for await streak in storage.values(forKey: "streak", as: Int.self) {
    ///     label.text = "\(streak ?? 0) days"
    /// }
    /// ```
    ///
    /// While the store is unavailable no value is yielded (absence is never invented); the
    /// current value follows once it becomes available. A stored value that does not decode as
    /// `T` is skipped and logged. The stream ends when the task is cancelled or the store is
    /// deallocated.
    public func values<T: Decodable & Sendable>(
        forKey key: any TinyStorageKey, as type: T.Type = T.self
    ) -> AsyncStream<T?> {
        // NB: the store feeds a stream of stored bytes, under its lock for the first value and
        // from its delivery queue after; decoding (the type's own code) and logging a value that
        // does not decode happen in the task that iterates, under no lock.
        let (stored, continuation) = AsyncStream<StoredValue?>.makeStream(bufferingPolicy: .unbounded)
        let name: String
        do throws(TinyStorageError) {
            name = try Self.validatedName(of: key)
        } catch {
            report(error)
            continuation.finish()
            return AsyncStream(unfolding: { nil })
        }
        let subscriberID = UUID()
        let register: (UInt64) -> Void = { [subscribers] startAfter in
            let subscriber = ValueSubscriber(
                key: name, startAfter: startAfter, receive: { continuation.yield($0) },
                finish: { continuation.finish() })
            subscribers.withLock { $0[subscriberID] = subscriber }
        }
        engine.carryValuesInChanges()
        do throws(TinyStorageError) {
            // NB: registered and first value queued under the engine's lock, which every commit
            // also holds to number its change: so no change is missed, repeated or reordered.
            try engine.withLiveEntriesAndLastChange { entries, lastChange in
                register(lastChange)
                continuation.yield(entries[name]?.stored)
            }
        } catch {
            register(engine.delivery.lastSequence)
        }
        continuation.onTermination = { [weak self] _ in
            self?.subscribers.withLock { $0[subscriberID] = nil }
        }
        let source = StreamIterator(stored.makeAsyncIterator())
        let logger = self.logger
        let clock = engine.options.clock
        return AsyncStream(unfolding: {
            while let next = await source.next() {
                // NB: a value handed over live may have expired by the time the task takes it.
                guard let next, !next.hasExpired(at: clock.now()) else { return .some(nil) }
                do throws(TinyStorageError) {
                    return .some(try Self.decode(T.self, from: next, key: key, name: name).value)
                } catch {
                    logger.log(.warning, error.description)
                }
            }
            return nil
        })
    }
}

/// The iterator of one stream, advanced by another stream built on it (a value stream's stored
/// bytes, decoded; a typed key's values, absent ones read as its default).
///
/// NB: `@unchecked Sendable`: an `AsyncStream` calls its producing closure for one `next()` at a
/// time (two at once is a fatal error), so the iterator is never used by two tasks at once.
private final class StreamIterator<Element: Sendable>: @unchecked Sendable {
    private var iterator: AsyncStream<Element>.Iterator

    init(_ iterator: AsyncStream<Element>.Iterator) {
        self.iterator = iterator
    }

    func next() async -> Element? {
        await iterator.next()
    }
}

extension TinyStorage {
    /// The value for `key` now, then after every change to it, from this process or another, in
    /// commit order: as ``values(forKey:as:)``, with an absent key read as the key's default and
    /// older stored shapes as the current one (see ``Key/migrating(from:_:)``).
    ///
    /// ```swift
    /// for await streak in storage.values(for: .streak) {
    ///     label.text = "\(streak) days"
    /// }
    /// ```
    ///
    /// While the store is unavailable nothing is yielded: the default stands for "absent from a
    /// store that was read", never for "unknown". The stream ends when the task is cancelled or
    /// the store is deallocated.
    public func values<Value>(for key: Key<Value>) -> AsyncStream<Value> {
        let source = StreamIterator(values(forKey: key, as: Value.self).makeAsyncIterator())
        let defaultValue = key.defaultValue
        return AsyncStream(unfolding: { await source.next().map { $0 ?? defaultValue } })
    }
}

/// One live `values(forKey:as:)` stream.
final class ValueSubscriber: Sendable {
    let key: String
    /// Changes numbered up to this were already reflected in the first value yielded.
    let startAfter: UInt64
    let receive: @Sendable (StoredValue?) -> Void
    let finish: @Sendable () -> Void
    /// When set, receives every change whatever its keys (for `rawChanges()`), instead of `receive`.
    let receiveChange: (@Sendable (ChangeSet) -> Void)?

    init(
        key: String, startAfter: UInt64, receive: @escaping @Sendable (StoredValue?) -> Void,
        finish: @escaping @Sendable () -> Void, receiveChange: (@Sendable (ChangeSet) -> Void)? = nil
    ) {
        self.key = key
        self.startAfter = startAfter
        self.receive = receive
        self.finish = finish
        self.receiveChange = receiveChange
    }
}
