// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import Foundation
import TinyStorage

/// How the tool shows when values expire: an ISO 8601 time in UTC, to the millisecond, as the
/// store keeps it, and how far away it is.
enum ExpirationText {
    /// `2025-01-01T00:10:00.000Z`.
    static func timestamp(_ deadline: Deadline) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: deadline.date)
    }

    /// `in 9 minutes`, `in 2 hours`: how long until `deadline` from `now` (ms since 1970), in
    /// whole units, rounded down (but never "in 0 seconds": "in less than a second").
    static func remaining(until deadline: Deadline, from now: UInt64) -> String {
        let milliseconds = deadline.milliseconds > now ? deadline.milliseconds - now : 0
        let seconds = milliseconds / 1000
        let (count, unit): (UInt64, String) =
            switch seconds {
            case 0: (0, "")
            case ..<120: (seconds, "second")
            case ..<(120 * 60): (seconds / 60, "minute")
            case ..<(48 * 3600): (seconds / 3600, "hour")
            default: (seconds / 86_400, "day")
            }
        guard count > 0 else { return "in less than a second" }
        return "in \(count) \(unit)\(count == 1 ? "" : "s")"
    }

    /// `2025-01-01T00:10:00.000Z (in 9 minutes)`, from the wall clock now.
    static func describe(_ deadline: Deadline) -> String {
        "\(timestamp(deadline)) (\(remaining(until: deadline, from: now)))"
    }

    /// The wall clock now, in milliseconds since 1970, as the store reads it.
    static var now: UInt64 {
        UInt64(clamping: Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)))
    }

    /// The lifetime `--expires-after` gives, in seconds (fractions allowed), as a `Duration`.
    /// - Throws: `.invalidInput` unless it is a number of seconds more than zero.
    static func lifetime(seconds text: String) throws(CLIError) -> Duration {
        guard let seconds = Double(text), seconds.isFinite, seconds > 0, seconds < 1e15 else {
            throw CLIError(
                .invalidInput,
                "--expires-after takes a number of seconds more than zero, such as 3600 or 0.5, not "
                    + "\(JSONText.quoted(text)). Nothing was written.")
        }
        return .milliseconds(Int64((seconds * 1000).rounded(.up)))
    }
}

#endif
