import Testing

/// Every command explains itself with an example, and the root lists the exit codes.
@Suite struct CLIHelpTests {
    @Test(arguments: [
        [], ["keys"], ["read"], ["write"], ["delete"], ["export"], ["import"], ["info"], ["watch"], ["verify"],
        ["compact"], ["import-userdefaults"], ["demo"],
    ])
    func helpHasAnAbstractAndAnExample(command: [String]) throws {
        let sandbox = try CLISandbox()
        let help = try sandbox.run(command + ["--help"])
        help.expectSuccess()
        #expect(help.output.hasPrefix("OVERVIEW: "))
        #expect(help.output.contains("EXAMPLE"))
        #expect(help.output.contains("USAGE: tinystorage"))
    }

    @Test func theDemoHelperIsNotListed() throws {
        let help = try CLISandbox().run("--help")
        #expect(help.output.contains("  demo "))
        #expect(!help.output.contains("demo-child"))
    }

    @Test func rootHelpListsEveryExitCode() throws {
        let help = try CLISandbox().run("--help")
        for code in ["0", "1", "3", "4", "5", "6", "7", "8", "9", "64", "70", "74"] {
            #expect(help.output.contains("\n  \(code) "), "exit code \(code) is documented")
        }
    }
}
