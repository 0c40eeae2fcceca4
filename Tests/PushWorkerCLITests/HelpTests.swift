import TestSupport
import Testing

@Suite("pushworker --version and help")
struct HelpTests {
    @Test("--version prints the version and exits 0")
    func version() async throws {
        let result = try await Program.running(["--version"])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.split(separator: ".").count == 3, "\(result.standardOutput)")
    }

    @Test("run --help says where the broker URL comes from and what a signal does")
    func runHelp() async throws {
        let help = try await Program.running(["run", "--help"]).standardOutput
        #expect(help.contains("PUSHWORKER_AMQP_URL"))
        #expect(help.contains("SIGTERM"))
    }

    @Test("every option of send, channels create and the benchmarks has a help text")
    func optionsExplained() async throws {
        for (program, command) in [("pushworker", ["send"]), ("pushworker", ["channels", "create"]), ("pushworker-bench", ["apns"]), ("pushworker-bench", ["e2e"])] {
            let help = try await Program.running(command + ["--help"], program: Program.built(program)).standardOutput
            let lines = help.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            // `  --name <value>   text`, or the text on the next, deeper-indented line.
            let option = /^  (-\w, )?--[\w-]+( <[\w-]+>)?( +\S.*)?$/
            for (index, line) in lines.enumerated() {
                guard let match = line.wholeMatch(of: option) else { continue }
                let explained = match.output.3 != nil
                    || (index + 1 < lines.count && lines[index + 1].hasPrefix("      ") && !lines[index + 1].trimmingCharacters(in: .whitespaces).hasPrefix("-"))
                #expect(explained, "\(command.joined(separator: " ")): \(line) has no help text")
            }
            #expect(lines.contains { $0.wholeMatch(of: option) != nil }, "no options found in:\n\(help)")
        }
    }
}
