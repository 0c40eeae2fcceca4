import ArgumentParser

/// The benchmarks, a program of their own so that `pushworker` links nothing only they need
/// (the synthetic registry's SQL, h2load-style senders, the e2e driver). `bench e2e` runs the
/// `pushworker` built beside it.
@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushworker-bench",
        abstract: "Measure pushworker's parts against real servers and print the figures.",
        subcommands: [AMQPBenchCommand.self, APNsBenchCommand.self, DecodeBenchCommand.self, LogBenchCommand.self, LookupBenchCommand.self, FCMBenchCommand.self, E2EBenchCommand.self, ResolveBenchCommand.self, RetentionBenchCommand.self])
}
