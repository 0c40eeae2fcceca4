import ArgumentParser

@main
struct PushWorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushworker",
        abstract: "A RabbitMQ-driven APNs push worker.",
        version: PushWorkerCommand.version,
        subcommands: [RunCommand.self, ConfigCommand.self, EnqueueCommand.self, TailCommand.self, DLQCommand.self, SendCommand.self, TokenCommand.self, RegistryCommandLine.self, QueuesCommand.self, ChannelsCommand.self]
    )

    /// Printed by `pushworker --version`; raised with every release.
    static let version = "0.4.0"
}
