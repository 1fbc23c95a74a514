import Foundation
import Logging
import Testing

@testable import TinyStorage

/// Issue 34, item 7: a library prints nothing routine into an app's output, and an error is one
/// sentence with its cause, not the same sentence nested two or three times.
@Suite struct LoggingDefaultsTests {
    /// Every record a swift-log handler received, with its label and source.
    final class CapturingHandler: LogHandler, @unchecked Sendable {
        // @unchecked: `records` is only touched under `lock`; the rest is set before use.
        let label: String
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        private let lock = NSLock()
        private var captured: [(level: Logger.Level, source: String, message: String)] = []

        init(label: String) { self.label = label }

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            lock.withLock { captured.append((event.level, event.source, "\(event.message)")) }
        }

        var records: [(level: Logger.Level, source: String, message: String)] { lock.withLock { captured } }
    }

    @Test func theDefaultSwiftLogLoggerLetsOnlyWarningsAndWorseThrough() {
        let logger = SwiftLogTinyStorageLogger()
        #expect(logger.logger.label == "TinyStorage")
        #expect(logger.logger.logLevel == .warning)
    }

    @Test func aLoggerPassedInKeepsItsOwnLevel() {
        var logger = Logger(label: "com.example.app")
        logger.logLevel = .debug
        #expect(SwiftLogTinyStorageLogger(logger).logger.logLevel == .debug)
    }

    /// `TinyStorage: [TinyStorage] …` said the name twice: under the default label, the source
    /// names the category instead; under an app's label it stays the module's name.
    @Test(arguments: [("TinyStorage", "storage"), ("com.example.app", "TinyStorage")])
    func theSourceDoesNotRepeatTheLabel(label: String, source: String) {
        let handler = CapturingHandler(label: label)
        let logger = SwiftLogTinyStorageLogger(Logger(label: label) { _ in handler })
        logger.log(.warning, "the message", file: #fileID, function: #function, line: #line)
        #expect(handler.records.map(\.source) == [source])
        #expect(handler.records.map(\.message) == ["the message"])
    }

    /// An unavailable store's error repeats its cause's sentence in its own message: the
    /// description says it once, followed by the system's reason.
    @Test func anErrorThatRepeatsItsCauseSaysEachSentenceOnce() {
        let storage = TinyStorage.inMemory()
        let cause = TinyStorageError.system(Errno(EACCES), "open", path: "/stores/settings/store.lock")
        let error = storage.engine.unavailable(cause)
        let description = error.description
        #expect(description.components(separatedBy: cause.message).count == 2, "once: \(description)")
        #expect(description.hasSuffix("(cause: permissionDenied: \(Errno(EACCES)))"), "\(description)")
        #expect(description.hasPrefix("TinyStorageError.unavailable: "))
    }

    @Test func aCauseWithItsOwnSentenceIsStillShown() {
        let inner = TinyStorageError(.io, "The disk said no.", underlying: Errno(EIO))
        let outer = TinyStorageError(.unavailable, "The store cannot be read.", underlying: inner)
        #expect(
            outer.description
                == "TinyStorageError.unavailable: The store cannot be read. (cause: TinyStorageError.io: "
                + "The disk said no. (cause: \(Errno(EIO))))")
    }
}
