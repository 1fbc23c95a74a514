import Foundation
import Testing

/// A test case's own directory under the temporary directory, created empty and private.
struct TestStoreDirectory {
    let url: URL

    /// Creates `<temporary directory>/TinyStorageTesting-<test name>-<UUID>/`, readable by the
    /// owner only. The test's name is there to tell whose directory a leftover is.
    init(for test: Test) throws {
        let name = String(test.name.map { $0.isLetter || $0.isNumber ? $0 : "-" }.prefix(60))
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("TinyStorageTesting-\(name)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(
            at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    /// Removes the directory and everything in it. A failure other than "already gone" is
    /// recorded as an issue of the running test: the directory is left behind.
    func remove() {
        do {
            try FileManager.default.removeItem(at: url)
        } catch CocoaError.fileNoSuchFile {
            // The test removed it itself.
        } catch {
            Issue.record("The isolated store's directory could not be removed, at \(url.path): \(error)")
        }
    }
}
