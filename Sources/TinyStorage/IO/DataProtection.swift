#if canImport(Darwin) && !os(macOS) && !targetEnvironment(simulator)
import Foundation
#endif

/// Apple data protection, read and set through Foundation: the adapter under
/// ``SystemFileSystem``'s protection calls on Apple's devices.
///
/// On iOS, files are by default encrypted until the user first unlocks the device after a reboot
/// (Apple's "Encrypting Your App's Files": the default class is "complete until first user
/// authentication"), and apps are launched before that (prewarming, widgets, Live Activities). A
/// store must be readable then, so its folder and every file it uses carry no protection
/// (`FileProtectionType.none`). Which items are changed, and when, is decided in shared code
/// (`StoreFolder`, tested on Linux through `SimulatedDataProtection`); this type only creates,
/// reads and sets. Do not keep secrets in TinyStorage; use the Keychain.
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
    /// class: the caller opens the directory next, and checks its class before any file is created
    /// in it (Apple's advice: set the class on a directory, then create the files in it).
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

    /// The class of the item at `path` itself: `FileManager.attributesOfItem(atPath:)`, whose
    /// attributes describe a symbolic link at `path`, not what it leads to, and their
    /// `.protectionKey`. An item with no such attribute (a volume without data protection) is
    /// ``ProtectionClass/none``.
    static func protectionClass(ofItemAt path: String) -> Result<ProtectionClass, Errno> {
        #if canImport(Darwin) && !os(macOS) && !targetEnvironment(simulator)
        let attributes: [FileAttributeKey: Any]
        do {
            attributes = try FileManager.default.attributesOfItem(atPath: path)
        } catch {
            return .failure(errno(of: error))
        }
        // NB: the documented value is an NSString holding one of the `FileProtectionType` values.
        let value = attributes[.protectionKey]
        guard let type = (value as? FileProtectionType) ?? (value as? String).map(FileProtectionType.init(rawValue:))
        else { return .success(.none) }
        switch type {
        case .none: return .success(.none)
        case .complete: return .success(.complete)
        case .completeUnlessOpen: return .success(.completeUnlessOpen)
        case .completeUntilFirstUserAuthentication: return .success(.completeUntilFirstUserAuthentication)
        case .completeWhenUserInactive: return .success(.completeWhenUserInactive)
        default: return .success(ProtectionClass(rawValue: type.rawValue))
        }
        #else
        return .success(.none)
        #endif
    }

    /// Gives the item at `path` no data protection:
    /// `FileManager.setAttributes([.protectionKey: FileProtectionType.none], ofItemAtPath:)`.
    /// The caller has just found (`fstatat(2)`, no link followed) that `path` names the store's
    /// own file or folder.
    static func removeProtection(ofItemAt path: String) -> Result<Void, Errno> {
        #if canImport(Darwin) && !os(macOS) && !targetEnvironment(simulator)
        do {
            try FileManager.default.setAttributes([.protectionKey: FileProtectionType.none], ofItemAtPath: path)
            return .success(())
        } catch {
            return .failure(errno(of: error))
        }
        #else
        return .success(())
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
        if nsError.domain == NSCocoaErrorDomain {
            switch nsError.code {
            case NSFileWriteFileExistsError: return .exists
            case NSFileReadNoSuchFileError, NSFileNoSuchFileError: return .notFound
            case NSFileReadNoPermissionError, NSFileWriteNoPermissionError: return .notPermitted
            default: break
            }
        }
        return .ioError
    }
    #endif
}
