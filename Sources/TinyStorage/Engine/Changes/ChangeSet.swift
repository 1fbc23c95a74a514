/// Keys changed by one commit, local or from another process.
struct ChangeSet: Sendable, Equatable {
    /// NB: a ``SmallList``, so a commit of one key allocates no array for it.
    var keys: SmallList<String>
    /// The value each key holds after the commit (`nil`: removed), parallel to `keys`; empty
    /// until a value stream is opened (see ``Engine/carryValuesInChanges()``): only streams need them.
    var values: [StoredValue?]
    var writeID: String?
    var isExternal: Bool
    /// Numbered by ``ChangeDelivery`` in commit order.
    var sequence: UInt64 = 0
}
