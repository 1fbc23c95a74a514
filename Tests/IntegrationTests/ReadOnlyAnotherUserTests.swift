import Foundation
import Testing
import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue 33, item 1, as its acceptance reads: a process of another user, with read permission
/// only, opens the store with `access: .readOnly`, reads every key, sees a second process's
/// commits as they happen, and has every write refused; nothing in the store's folder changes,
/// not a byte and not a time stamp. The reader is the test helper's `read-only` command, run as
/// `nobody` through `setpriv(1)` (the tests run as root, which may write anything); the store
/// belongs to root, its folder mode 0755 and its files 0644, and this test process writes it.
@Suite(.enabled(if: Unprivileged.isSupported, "\(Unprivileged.unsupportedReason ?? "")"))
struct ReadOnlyAnotherUserTests {
    /// Every byte (the lock file's included), mode, owner, modification and change time of the
    /// folder and everything in it.
    static func exactState(of folder: URL) throws -> [String] {
        var paths = [""]
        let enumerator = FileManager.default.enumerator(atPath: folder.path)
        while let relative = enumerator?.nextObject() as? String { paths.append(relative) }
        return try paths.sorted().map { relative in
            let path = relative.isEmpty ? folder.path : folder.appendingPathComponent(relative).path
            var info = stat()
            try #require(lstat(path, &info) == 0, "lstat \(path): errno \(errno)")
            let isFile = (info.st_mode & S_IFMT) == S_IFREG
            let bytes = isFile ? try Data(contentsOf: URL(fileURLWithPath: path)).base64EncodedString() : "-"
            #if canImport(Darwin)
            let (modified, changed) = (info.st_mtimespec, info.st_ctimespec)
            #else
            let (modified, changed) = (info.st_mtim, info.st_ctim)
            #endif
            return "\(relative) mode \(String(info.st_mode, radix: 8)) uid \(info.st_uid) "
                + "mtime \(modified.tv_sec).\(modified.tv_nsec) ctime \(changed.tv_sec).\(changed.tv_nsec) " + bytes
        }
    }

    /// Runs the helper (as root) to completion: a writer process that exits once it has written.
    static func write(_ arguments: [String]) throws {
        let run = try Helper.run(arguments)
        #expect(run.status == 0, "\(arguments): \(run.errors)")
    }

    @Test func anotherUserReadsEveryKeySeesCommitsLiveAndChangesNothing() throws {
        let parent = FileManager.default.temporaryDirectory.appendingPathComponent(
            "TinyStorageReadOnly-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: parent) }
        try setPermissions(parent, 0o755)
        // NB: every write is made by a process that exits once it has written, so what changes
        // in the folder while no writer runs can only be the reader's doing.
        try Self.write(["write", parent.path, "store", "streak", "364"])
        try Self.write(["write-json", parent.path, "store", "name", "\"ada\""])
        let folder = parent.appendingPathComponent("store")
        try setPermissions(folder, 0o755)
        for file in ["store.tinystorage", "store.lock"] {
            try setPermissions(folder.appendingPathComponent(file), 0o644)
        }

        let before = try Self.exactState(of: folder)
        let reader = try UnprivilegedHelperProcess(["read-only", parent.path, "store"], withInput: true)
        defer { reader.closeInput() }
        #expect(reader.readLine() == "ready", "\(reader.errorOutput)")
        reader.send("dump")
        #expect(
            reader.readLines(through: "end") == ["value name \"ada\"", "value streak 364"], "\(reader.errorOutput)")
        for request in ["write streak 1", "write new 1", "compact"] {
            reader.send(request)
            #expect(reader.readLine() == "refused readOnly", "\(request)")
        }
        let afterReads = try Self.exactState(of: folder)
        #expect(afterReads == before, "changed: \(Set(afterReads).symmetricDifference(before).sorted())")

        // Another process's commit is announced to the reader, and read by it.
        try Self.write(["write", parent.path, "store", "streak", "365"])
        #expect(reader.readLine() == "change streak none")
        reader.send("dump")
        #expect(reader.readLines(through: "end") == ["value name \"ada\"", "value streak 365"])
        // A compaction by a writer opened `readableBy: .everyone` replaces the file with one the
        // reader may read; the next commit is announced and read from the new file.
        try Self.write(["compact-readable-by", parent.path, "store", "everyone"])
        try Self.write(["write-json", parent.path, "store", "name", "\"bob\""])
        #expect(reader.readLine() == "change name none")
        reader.send("dump")
        #expect(reader.readLines(through: "end") == ["value name \"bob\"", "value streak 365"])

        let afterWrites = try Self.exactState(of: folder)
        reader.send("write streak 2")
        #expect(reader.readLine() == "refused readOnly")
        reader.send("dump")
        #expect(reader.readLines(through: "end").count == 2)
        let afterRefusal = try Self.exactState(of: folder)
        #expect(afterRefusal == afterWrites, "changed: \(Set(afterRefusal).symmetricDifference(afterWrites).sorted())")
        reader.closeInput()
        #expect(reader.finish().status == 0, "\(reader.errorOutput)")
    }
}
