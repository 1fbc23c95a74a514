// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import ArgumentParser
import Dispatch
import Foundation
import TinyStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `tinystorage watch <store-dir>`
struct WatchCommand: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print every change to a store as it happens, from any process.",
        discussion: """
            Prints one line per changed key: the key as a JSON string, its new value as compact \
            JSON (numbers may be shown normalized, 1.0 as 1; a Data value as a base64 string \
            followed by (Data)) or (removed), and the writer's writeID, as a JSON string, when it \
            passed one. Changes made by other processes, such as an app or another \
            `tinystorage write`, show up within milliseconds, in commit order. Each line is written \
            as soon as the change is seen, so the output can be piped.

            Runs until interrupted: Ctrl-C (SIGINT) or SIGTERM stops it with exit code 0. A note \
            on standard error says when it is watching. Opens the store read-only: creates nothing \
            and writes nothing, not even store.lock, so it works on a store you may read but not \
            write.

            EXAMPLES:
              tinystorage watch ./settings
              tinystorage watch ./settings | grep --line-buffered streak

            OUTPUT:
              "streak": 366
              "profile": {"age":36,"name":"Ada"}
              "name": "Ada"  (writeID: "sync-42")
              "avatar": "iVBORw0KGgo=" (Data)
              "old-flag": (removed)
            """
    )

    @OptionGroup var store: StoreArgument

    func execute() throws(CLIError) {
        let directory = store.directory
        // NB: the signals are turned into dispatch events before anything else, so an interrupt
        // that arrives at any moment after the "watching" note ends the command with 0.
        let stop = DispatchSemaphore(value: 0)
        let sources = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { stop.signal() }
            source.resume()
            return source
        }
        let storage = try directory.openForReading()
        let changes = storage.rawChanges()
        let printer = Task.detached {
            for await change in changes {
                Console.write(Self.lines(for: change))
            }
        }
        // NB: file events only prompt the store to look at its shared commit counter, and an
        // event can arrive after another process appended a commit but before it published it;
        // the commit is then noticed only at the next event. Looking every 100 ms as well
        // bounds that delay. A look is a counter comparison when nothing changed.
        let poll = DispatchSource.makeTimerSource(queue: .global())
        poll.schedule(deadline: .now() + .milliseconds(100), repeating: .milliseconds(100))
        poll.setEventHandler { _ = try? storage.rawValue(forKey: "watch") }
        poll.resume()
        Console.note("watching '\(directory.path)' for changes; press Ctrl-C to stop.", prefix: "note")
        stop.wait()
        poll.cancel()
        printer.cancel()
        withExtendedLifetime((storage, sources)) {}
    }

    /// One line per key of one commit.
    static func lines(for change: TinyStorage.RawChange) -> String {
        let writeID = change.writeID.map { "  (writeID: \(JSONText.quoted($0)))" } ?? ""
        return zip(change.keys, change.values).map { key, value in
            JSONText.quoted(key) + ": " + (value.map(shown) ?? "(removed)") + writeID + "\n"
        }.joined()
    }

    private static func shown(_ value: StoredValue) -> String {
        let shown = JSONText.shown(value)
        return JSONText.compact(shown.json) + (shown.isBase64 ? " (Data)" : "")
    }
}

#endif
