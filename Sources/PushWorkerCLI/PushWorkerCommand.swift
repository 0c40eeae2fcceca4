import APNs
import ArgumentParser

@main
struct PushWorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushworker",
        abstract: "A RabbitMQ-driven APNs push worker.",
        version: PushWorkerCommand.version,
        subcommands: [RunCommand.self, ConfigCommand.self, EnqueueCommand.self, TailCommand.self, DLQCommand.self, SendCommand.self, TokenCommand.self, RegistryCommandLine.self, QueuesCommand.self, ChannelsCommand.self, DeliveriesCommand.self, ScheduleCommand.self]
    )

    /// ArgumentParser's own entry, after OpenSSL is told not to clean up at exit (its first call).
    static func main() async {
        OpenSSLProcess.skipCleanupAtExit()
        do {
            var command = try parseAsRoot()
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
    static let version = "0.4.0"
}
