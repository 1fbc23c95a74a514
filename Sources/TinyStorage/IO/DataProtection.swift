#if canImport(Darwin)
import Foundation
#endif

/// Apple data protection for the store's files.
///
/// On iOS, files are by default encrypted until the user first unlocks the device after a reboot,
/// and apps are launched before that (prewarming, widgets, Live Activities). A store must be
/// readable then, so its directory and files carry no protection (`FileProtectionType.none`).
/// Do not keep secrets in TinyStorage; use the Keychain.
enum DataProtection {
    /// Removes data protection from the file or directory at `path`. Does nothing off Apple platforms.
    static func removeProtection(atPath path: String) {
        #if canImport(Darwin) && !os(macOS)
        // NB: best effort. If this fails the file keeps its default class, and the store reports
        // `.unavailable` before first unlock instead of pretending to be empty.
        try? FileManager.default.setAttributes([.protectionKey: FileProtectionType.none], ofItemAtPath: path)
        #endif
    }
}
