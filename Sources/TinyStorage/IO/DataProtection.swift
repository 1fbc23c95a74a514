#if canImport(Darwin) && !os(macOS) && !targetEnvironment(simulator)
import Foundation
#endif

/// Apple data protection for the store's files.
///
/// On iOS, files are by default encrypted until the user first unlocks the device after a reboot,
/// and apps are launched before that (prewarming, widgets, Live Activities). A store must be
/// readable then, so its files carry no protection (`FileProtectionType.none`). Files take the
/// class their directory gives new files when they are created, so what the store does is about
/// directories only: each one it creates is created unprotected, and each one it opens that would
/// give new files protection is changed before any file is created in it. Do not keep secrets in
/// TinyStorage; use the Keychain.
///
/// Off Apple's data-protected platforms there is nothing to do, and neither in the Simulator,
/// which does not model protection classes (Foundation neither reports nor sets them there).
enum DataProtection {
    /// Creates the directory at `path` with no data protection and permissions `mode`
    /// (`FileManager.createDirectory(atPath:withIntermediateDirectories:attributes:)` with
    /// `.protectionKey: .none`), so files created in it are readable before first unlock.
    ///
    /// NB: Foundation makes the directory, then sets the attributes, and ignores a failure to set
    /// them (swift-foundation, `FileManager+Directories.swift`), so success here does not prove the
    /// class: the caller opens the directory next, and ``removeProtection(ofDirectoryAt:)`` checks
    /// it before any file is created in it (Apple's advice: set the class on a directory, then
    /// create the files in it).
    ///
    /// - Returns: `nil` where creation with a class is not a thing (the caller uses `mkdirat(2)`),
    ///   else the result.
    static func createUnprotectedDirectory(atPath path: String, mode: Int) -> Result<Void, Errno>? {
        #if canImport(Darwin) && !os(macOS) && !targetEnvironment(simulator)
        do {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: false,
                attributes: [.posixPermissions: mode, .protectionKey: FileProtectionType.none])
            return .success(())
        } catch {
            return .failure(errno(of: error))
        }
        #else
        return nil
        #endif
    }

    /// Makes the directory at `path` give new files no protection, when it does not already.
    ///
    /// - Returns: whether it had to change the directory (the caller logs that).
    static func removeProtection(ofDirectoryAt path: String) -> Result<Bool, Errno> {
        #if canImport(Darwin) && !os(macOS) && !targetEnvironment(simulator)
        let current = (try? FileManager.default.attributesOfItem(atPath: path))?[.protectionKey]
        if let current = current as? FileProtectionType, current == .none { return .success(false) }
        do {
            try FileManager.default.setAttributes([.protectionKey: FileProtectionType.none], ofItemAtPath: path)
            return .success(true)
        } catch {
            return .failure(errno(of: error))
        }
        #else
        return .success(false)
        #endif
    }

    #if canImport(Darwin) && !os(macOS) && !targetEnvironment(simulator)
    /// The POSIX error inside a Foundation error, or `EIO`.
    private static func errno(of error: any Error) -> Errno {
        let nsError = error as NSError
        if nsError.domain == NSPOSIXErrorDomain { return Errno(Int32(nsError.code)) }
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain
        {
            return Errno(Int32(underlying.code))
        }
        if nsError.domain == NSCocoaErrorDomain && nsError.code == NSFileWriteFileExistsError { return .exists }
        return .ioError
    }
    #endif
}
