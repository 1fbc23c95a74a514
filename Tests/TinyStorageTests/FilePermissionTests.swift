import Foundation
import Testing

@testable import TinyStorage

/// G8: files are private to their owner.
@Suite struct FilePermissionTests {
    @Test func newStoreFilesAreOwnerOnly() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            try storage.storeOrThrow(1, forKey: "k")
            #expect(try permissions(storage.directoryURL) == 0o700)
            #expect(try permissions(storage.fileURL) == 0o600)
            #expect(try permissions(storage.directoryURL.appendingPathComponent("store.lock")) == 0o600)
            #expect(storage.directoryURL.lastPathComponent == "store")
            #expect(storage.fileURL.lastPathComponent == "store.tinystorage")
            #expect(
                storage.fileURL.deletingLastPathComponent().standardizedFileURL
                    == storage.directoryURL.standardizedFileURL)
        }
    }

    @Test func aMissingInsideDirectoryIsCreatedOwnerOnly() throws {
        try withTemporaryDirectory { sandbox throws in
            let inside = sandbox.appendingPathComponent("app-support", isDirectory: true)
            let storage = openStore(inside)
            #expect(storage.availability.isAvailable)
            #expect(try permissions(inside) == 0o700)
            #expect(try permissions(storage.directoryURL) == 0o700)
        }
    }

    @Test func storeFilesStayOwnerOnlyAfterCompaction() throws {
        try withTemporaryDirectory { directory throws in
            let storage = openStore(directory)
            let generation = try headerGeneration(storage.fileURL)
            let filler = String(repeating: "p", count: 8 << 10)
            var round = 0
            while try headerGeneration(storage.fileURL) == generation {
                try storage.storeOrThrow("\(round)" + filler, forKey: "filler")
                round += 1
                try #require(round < 1_000, "no compaction after \(round) large overwrites")
            }
            #expect(try permissions(storage.fileURL) == 0o600)
            #expect(try permissions(storage.directoryURL) == 0o700)
        }
    }
}
