public import Foundation

extension TinyStorage {
    /// Posted after a change to the store, by this process or another one.
    ///
    /// `object` is the ``TinyStorage`` instance; `userInfo[changedKeysUserInfoKey]` holds the
    /// changed keys as `[String]`, and `userInfo[writeIDUserInfoKey]` the writer's writeID as a
    /// `String` when it passed one. One notification per commit, in commit order (another
    /// process's consecutive commits that carry the same writeID, or none, as one notification
    /// naming every key they changed; never commits with different writeIDs; and once 1,024
    /// notifications wait for their queue, further changes join the last one), posted on the
    /// main queue, which the main actor runs (in an `async` `@main` on Linux, on a thread that is
    /// not the main thread), or on the store's `notificationQueue`, about a millisecond after the commit
    /// (changes by other processes: within a few milliseconds), never while the store holds a
    /// lock, so observers may read and write the store. Writes that leave the bytes unchanged
    /// post nothing.
    ///
    /// ```swift
    /// NotificationCenter.default.addObserver(
    ///     forName: TinyStorage.didChangeNotification, object: storage, queue: nil
    /// ) { notification in
    ///     guard notification.userInfo?[TinyStorage.writeIDUserInfoKey] as? String != "mine" else { return }
    ///     MainActor.assumeIsolated { reloadSettingsScreen() }  // posted on the main queue
    /// }
    /// ```
    ///
    /// The name and the `userInfo` keys are the original library's strings, so code that spells
    /// them out instead of using these constants keeps working.
    public static let didChangeNotification = Notification.Name("com.christianselig.TinyStorage.didChangeNotification")
    /// The `userInfo` key for the changed keys (`[String]`).
    public static let changedKeysUserInfoKey = "TinyStorage.changedKeys"
    /// The `userInfo` key for the writer's writeID (`String`), present when the write passed one.
    public static let writeIDUserInfoKey = "TinyStorage.WriteIDKey"

    func postDidChange(_ change: ChangeSet) {
        var userInfo: [AnyHashable: Any] = [Self.changedKeysUserInfoKey: Array(change.keys)]
        if let writeID = change.writeID { userInfo[Self.writeIDUserInfoKey] = writeID }
        NotificationCenter.default.post(name: Self.didChangeNotification, object: self, userInfo: userInfo)
    }
}
