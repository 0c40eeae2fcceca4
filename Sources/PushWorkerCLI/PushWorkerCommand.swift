import APNs
import ArgumentParser
import Foundation
import SecretEnvironment

@main
struct PushWorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushworker",
        abstract: "A RabbitMQ-driven APNs push worker.",
        version: PushWorkerCommand.version,
        subcommands: [RunCommand.self, ConfigCommand.self, EnqueueCommand.self, TailCommand.self, DLQCommand.self, SendCommand.self, TokenCommand.self, RegistryCommandLine.self, QueuesCommand.self, ChannelsCommand.self, DeliveriesCommand.self, ScheduleCommand.self, HealthCommand.self]
    )

    /// ArgumentParser's own entry, after OpenSSL is told not to clean up at exit (its first call).
    static func main() async {
        OpenSSLProcess.skipCleanupAtExit()
        // The commands other than `run` log through swift-log's StreamLogHandler, whose timestamp
        // comes from localtime(): that stats /etc/localtime on every line while TZ is unset.
        // Naming that same file keeps the zone and reads it once.
        if getenv("TZ") == nil { setenv("TZ", ":/etc/localtime", 0) }
        do {
            var command = try parseAsRoot()
            // PUSHWORKER_AMQP_URL_FILE and the like, before any command reads the variables (after
            // parsing, so that --help and --version never depend on them).
            try SecretEnvironment.applyToProcess()
            if var asynchronous = command as? any AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }

    /// Printed by `pushworker --version`; raised with every release.
    static let version = "0.4.3"
}
