/// An Apple data protection class: when the system lets a file be opened (see ``DataProtection``).
///
/// A file takes its class when it is created, from the class its directory gives new files, and
/// keeps it until someone changes it; a directory's class is only what it gives new files. On
/// iOS, a file of any class but ``none`` cannot be opened before the user first unlocks the device
/// after a restart (`EPERM`), and apps and widgets are launched then: every file a store uses, and
/// its folder, must be ``none``. Off Apple's devices every item is ``none``, but for the items a
/// test gives a class through the Linux stand-in (`SimulatedDataProtection`).
///
/// A struct with one static value per class rather than an enum, as `FileProtectionType` is: a
/// later system's class reads as itself, and counts as protection.
struct ProtectionClass: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    let rawValue: String

    init(rawValue: String) { self.rawValue = rawValue }

    /// `FileProtectionType.none`: readable and writable at any time.
    static let none = ProtectionClass(rawValue: "none")
    /// `FileProtectionType.complete`: only while the device is unlocked.
    static let complete = ProtectionClass(rawValue: "complete")
    /// `FileProtectionType.completeUnlessOpen`: an existing file opens only while the device is
    /// unlocked; a new one can be created while it is locked.
    static let completeUnlessOpen = ProtectionClass(rawValue: "completeUnlessOpen")
    /// `FileProtectionType.completeUntilFirstUserAuthentication`, the system's default: not
    /// before the first unlock after a restart, at any time after it.
    static let completeUntilFirstUserAuthentication = ProtectionClass(
        rawValue: "completeUntilFirstUserAuthentication")
    /// `FileProtectionType.completeWhenUserInactive` (iOS 17): not before the first unlock, and
    /// not once the user has been away for a while.
    static let completeWhenUserInactive = ProtectionClass(rawValue: "completeWhenUserInactive")

    /// Whether a file of this class can be created while the device is locked (before its first
    /// unlock): only ``none`` and ``completeUnlessOpen``, whose files are sealed when closed.
    var allowsCreationWhileLocked: Bool { self == .none || self == .completeUnlessOpen }

    var description: String { rawValue }
}

/// One item a store found with data protection, which it changed to ``ProtectionClass/none``.
struct ProtectionRemoval: Sendable, Equatable, CustomStringConvertible {
    /// The item's path.
    var path: String
    /// The class it had.
    var previous: ProtectionClass

    var description: String { "'\(path)' (was \(previous))" }
}
