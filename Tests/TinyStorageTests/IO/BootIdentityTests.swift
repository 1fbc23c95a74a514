import Foundation
import Testing

@testable import TinyStorage

/// Issue 28, D6: a lock page is trusted only during the boot that wrote it, and "this boot" is
/// a UUID the kernel makes as it boots (Linux's `boot_id`, Apple's `kern.bootsessionuuid`), read
/// as text by one parser on both: never the time of the boot, which setting the clock moves.
@Suite struct BootIdentityTests {
    @Test(arguments: [
        "6fd5a44b-35f4-4ad4-a9b9-6a9c7e5b9e5f\n",  // Linux: text and a line feed
        "6FD5A44B-35F4-4AD4-A9B9-6A9C7E5B9E5F\0",  // XNU: upper case and a NUL
        "6fd5a44b-35f4-4ad4-a9b9-6a9c7e5b9e5f",
    ])
    func aBootUUIDIsReadWhateverItsCaseAndEnd(text: String) {
        #expect(
            BootIdentity(uuidText: Array(text.utf8))
                == BootIdentity(high: 0x6fd5_a44b_35f4_4ad4, low: 0xa9b9_6a9c_7e5b_9e5f))
    }

    @Test(arguments: [
        "", "\n", "6fd5a44b35f44ad4a9b96a9c7e5b9e5f", "6fd5a44b-35f4-4ad4-a9b9-6a9c7e5b9e5",
        "6fd5a44b-35f4-4ad4-a9b9-6a9c7e5b9e5fa",
        "6fd5a44b-35f4-4ad4-a9b9-6a9c7e5b9e5g", "1706112000 0", "6fd5a44b-35f4-4ad4-a9b9-6a9c7e5b9e5f\nX",
    ])
    func anythingElseIsNoBootIdentity(text: String) {
        #expect(BootIdentity(uuidText: Array(text.utf8)) == nil)
    }

    /// This machine's boot identity is its kernel's boot UUID, the same in every process of
    /// this boot (a process reads it once), whatever the clock says.
    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/proc/sys/kernel/random/boot_id"), "Linux's boot_id"))
    func thisBootIsTheKernelsBootUUID() throws {
        let text = try String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)
        #expect(SystemFileSystem().bootIdentity == BootIdentity(uuidText: Array(text.utf8)))
    }
}
