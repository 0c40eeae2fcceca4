import AMQP
import ArgumentParser
import Foundation
import Logging
import PushWorker

/// The queues a configuration declares, against what the broker has: for an upgrade that changes
/// a queue's type (classic results and retry queues becoming quorum) or its arguments.
struct QueuesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queues",
        abstract: "Check the broker's queues against a configuration, and migrate those that differ.",
        discussion: """
            A queue's type and arguments cannot change in place: a worker whose configuration \
            declares a queue otherwise than it exists fails to start, naming the argument. \
            `migrate` empties such a queue into NAME.migrating, deletes it, declares it as \
            configured and moves the messages back, keeping every one. Stop the workers first.
            """,
        subcommands: [Check.self, Migrate.self])

    struct Location: ParsableArguments {
        @Option(help: "The worker's configuration file.") var config: String
        @Option(name: .customLong("amqp"), help: "Broker URL(s), comma-separated (default: from --config or $PUSHWORKER_AMQP_URL).") var url: String?

        func connect() async throws -> QueueMigration {
            let configuration = try PushWorkerConfiguration.load(file: config)
            var environment = ProcessInfo.processInfo.environment
            if let url { environment["PUSHWORKER_AMQP_URL"] = url }
            let broker = try BrokerPlan(configuration.worker, apps: configuration.apps.map(\.name), file: config, environment: environment)
            var logger = Logger(label: "pushworker.queues")
            logger.logLevel = .warning
            return try await QueueMigration.connect(broker, logger: logger)
        }
    }

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the configuration's queues: absent, as configured, or different (and how); exits 1 when one differs.")
        @OptionGroup var location: Location

        func run() async throws {
            let migration = try await location.connect()
            let steps = try await migration.plan()
            await migration.close()
            var differs = false
            for step in steps {
                let held = step.held > 0 ? "; \(step.held) message(s) held in \(step.queue).migrating: run migrate" : ""
                switch step.state {
                case .absent: print("\(step.queue): absent (a worker declares it)\(held)")
                case .asConfigured: print("\(step.queue): as configured, \(step.messages) message(s), \(step.consumers) consumer(s)\(held)")
                case .differs(let why):
                    differs = true
                    print("\(step.queue): DIFFERS, \(step.messages) message(s), \(step.consumers) consumer(s): \(why)")
                }
                if step.held > 0 { differs = true }
            }
            if differs {
                print("run `pushworker queues migrate --config \(location.config)` with the workers stopped")
                throw ExitCode(1)
            }
        }
    }

    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Redeclare the queues that differ from the configuration, keeping their messages (workers stopped).")
        @OptionGroup var location: Location

        func run() async throws {
            let migration = try await location.connect()
            let done: [String]
            do { done = try await migration.run() } catch {
                await migration.close()
                throw error  // a Refusal's text is meant for the operator as it is
            }
            await migration.close()
            for line in done { print(line) }
            if done.isEmpty { print("every queue is as configured: nothing to migrate") }
        }
    }
}
