import ArgumentParser

struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure pushworker's parts against real servers and print the figures.",
        subcommands: [AMQPBenchCommand.self, APNsBenchCommand.self, E2EBenchCommand.self, ResolveBenchCommand.self])
}
