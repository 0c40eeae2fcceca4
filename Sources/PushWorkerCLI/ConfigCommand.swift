import ArgumentParser
import CommandLineSupport
import Foundation
import PushWorker

/// Checks a configuration file the way `run` would, without connecting to anything: an operator
/// finds a misspelt key, a missing key file or an unset variable before the worker starts.
struct ConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Check a configuration file.",
        subcommands: [Check.self])

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Validate a configuration without connecting, and print the effective configuration (secrets masked).",
            discussion: """
                Applies the environment as `run` does (PUSHWORKER_AMQP_URL, PUSHWORKER_METRICS_ADDRESS, PUSHWORKER_POSTGRES_URL, \
                PUSHWORKER_APNS_URL_<APP>, key_env and password_env variables), reads the key and \
                certificate files, and prints the result with defaults filled in. Exits 1 and names \
                the file and the key on the first problem. Passwords and keys are never printed.
                """)

        @Option(help: "The worker's configuration file (YAML).") var config: String

        func run() async throws {
            do {
                let configuration = try PushWorkerConfiguration.load(file: config)
                print(try EffectiveConfiguration.check(configuration, file: config), terminator: "")
            } catch {
                throw CommandFailure("\(error)")
            }
        }
    }
}
