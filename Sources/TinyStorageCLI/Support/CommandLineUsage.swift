// The CLI exists where Foundation's `Process` does; UnsupportedPlatform.swift says why.
#if os(macOS) || os(Linux)

import ArgumentParser
import Foundation

/// How the tool parses its arguments and reports a usage error: as one `error:` line on standard
/// error, with the usage of the command it concerns, and exit code 64 (`EX_USAGE`), the way the
/// root command's help promises every error is reported. `--help` and `--version` print to
/// standard output and exit 0, as ArgumentParser does.
enum CommandLineUsage {
    /// The exit code of a usage error: `EX_USAGE` (sysexits.h), listed in the root command's help.
    static let usageExitCode: Int32 = 64

    static func main(_ root: any ParsableCommand.Type) {
        let arguments = Array(CommandLine.arguments.dropFirst())
        var command: any ParsableCommand
        do {
            command = try root.parseAsRoot(arguments)
        } catch {
            fail(error, root: root, arguments: arguments)
        }
        do {
            try command.run()
        } catch let exit as ExitCode {
            root.exit(withError: exit)
        } catch {
            fail(error, root: root, arguments: arguments)
        }
        root.exit()
    }

    /// Reports `error` and exits: help and version requests as ArgumentParser does, anything else
    /// as one `error:` line followed by the usage of the command the arguments name.
    private static func fail(_ error: any Error, root: any ParsableCommand.Type, arguments: [String]) -> Never {
        let code = root.exitCode(for: error)
        if code == .success { root.exit(withError: error) }
        var line = oneLine(root.message(for: error))
        if !line.hasSuffix(".") { line += "." }
        if let subcommand = subcommand(named: arguments, in: root) {
            let usage = oneLine(root.usageString(for: subcommand))
            line += " Usage: \(usage); see 'tinystorage \(subcommand._commandName) --help'."
        } else {
            line += " See 'tinystorage --help'."
        }
        Console.error(line)
        Foundation.exit(code.rawValue)
    }

    /// The subcommand the first argument names, if any.
    private static func subcommand(
        named arguments: [String], in root: any ParsableCommand.Type
    ) -> (any ParsableCommand.Type)? {
        guard let first = arguments.first else { return nil }
        return root.configuration.subcommands.first { $0._commandName == first }
    }

    /// `text` with its lines joined, and runs of spaces made one.
    private static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).map { $0.split(separator: " ").joined(separator: " ") }
            .joined(separator: " ")
    }
}

#endif
