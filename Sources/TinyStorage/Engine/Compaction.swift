import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension Engine {
    /// Whether the log has grown enough past its live data to be worth rewriting.
    static func shouldCompact(end: Int, liveBytes: Int) -> Bool {
        end >= minimumCompactionSize && end >= compactionRatio * liveBytes
    }

    /// Compacts when ``shouldCompact(end:liveBytes:)`` says so. Failures are logged, never thrown:
    /// the commit that triggered compaction has already succeeded.
    func compactIfNeeded(_ state: inout EngineState) {
        guard Self.shouldCompact(end: state.end, liveBytes: state.liveBytes) else { return }
        do throws(TinyStorageError) {
            try compact(&state)
        } catch {
            logger.log(.warning, "Compaction failed; the store keeps working on its current file. \(error)")
        }
    }

    /// Rewrites the live entries into a new file and puts it in place of the old one.
    ///
    /// Compacts now, whatever the log's size: opens or catches up first.
    func compactNow() throws(TinyStorageError) {
        try state.withLock { (state) throws(TinyStorageError) in
            if state.inMemory { return }  // nothing on disk to compact
            try ensureOpen(&state)
            try withFileLock(&state) { (state) throws(TinyStorageError) in
                if state.coordination?.sequence != state.seenSequence { try catchUp(&state) }
                try compact(&state)
            }
        }
    }

    /// Writes and verifies the new file, renames it over the old one (``writeReplacement``), then
    /// bumps the generation so other processes reload. A crash at any step leaves either the old
    /// file or the complete new one in place. Call under the file lock.
    func compact(_ state: inout EngineState) throws(TinyStorageError) {
        guard let coordination = state.coordination, state.isOpen else {
            throw TinyStorageError(.unavailable, "The store is not open.")
        }
        let generation = state.generation + 1
        let replacement = try writeReplacement(
            entries: state.entries, generation: generation, baseSequence: state.logSequence)
        let before = state.end
        state.logSequence += UInt64(state.entries.count)
        state.formatVersion = LogFormat.version
        state.dataFile = replacement.file
        state.generation = generation
        state.end = replacement.size
        state.physicalSize = replacement.size
        state.seenSequence = coordination.publish(generation: generation, length: replacement.size)
        logger.log(.debug, "Compacted \(location.dataPath) from \(before) to \(replacement.size) bytes.")
    }
}
