import ArgumentParser

@main
struct PushWorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushworker",
        abstract: "A RabbitMQ-driven APNs push worker.",
        subcommands: [RunCommand.self, EnqueueCommand.self, TailCommand.self, DLQCommand.self, SendCommand.self, TokenCommand.self, BenchCommand.self]
    )
}
