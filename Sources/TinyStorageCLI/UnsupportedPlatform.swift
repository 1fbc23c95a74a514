// `tinystorage` is built for macOS and Linux only. Its `demo` starts copies of itself with
// Foundation's `Process`, which exists on macOS and Linux but not on iOS, tvOS, watchOS or
// visionOS (nor under Mac Catalyst, where `os(macOS)` is false and `Process.run()` is missing), and
// a shell tool has no use there. Every other file of this target is compiled only under
// `os(macOS) || os(Linux)`, and Package.swift links ArgumentParser only there, so building the
// package for those platforms compiles just this entry point.
#if !(os(macOS) || os(Linux))
import Foundation

@main
enum UnsupportedPlatform {
    static func main() {
        let message = "tinystorage runs on macOS and Linux only: it needs Foundation's Process.\n"
        try? FileHandle.standardError.write(contentsOf: Data(message.utf8))
        exit(69)  // EX_UNAVAILABLE (sysexits.h)
    }
}
#endif
