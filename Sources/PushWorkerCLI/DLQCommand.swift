import AMQP
import ArgumentParser
import CommandLineSupport
import Foundation
import PushWorker

/// Operator tools for the dead letters: look at them, send them back, or throw them away.
struct DLQCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dlq",
        abstract: "List, show, replay and purge dead-lettered jobs.",
        subcommands: [List.self, Show.self, Replay.self, Purge.self])

    /// Where the dead letters are, from the worker's configuration or from options.
    struct Location: ParsableArguments {
        @Option(help: "The worker's configuration file: broker URL and queue names.") var config: String?
        @Option(name: .customLong("amqp"), help: "Broker URL (default: from --config, $PUSHWORKER_AMQP_URL, or the local broker).") var url: String?
        @Option(name: .customLong("queue"), help: "Dead-letter queue (default: from --config, or push.dead).") var queue: String?

        func resolve() throws -> (amqp: AMQPConfiguration, deadLetters: String, jobs: String) {
            var settings = WorkerSettings()
            var file = "(defaults)"
            if let config {
                settings = try PushWorkerConfiguration.load(file: config).worker
                file = config
            }
            var environment = ProcessInfo.processInfo.environment
            if let url { environment["PUSHWORKER_AMQP_URL"] = url }
            let broker = try BrokerPlan(settings, apps: [], file: file, environment: environment)
            return (broker.undeclared("pushworker dlq"), queue ?? settings.queues.deadLetters, settings.queues.jobs)
        }
    }

    /// Which dead letters a command applies to.
    struct Filter: ParsableArguments {
        @Option(name: .customLong("id"), help: "Only this message id; repeatable.") var ids: [String] = []
        @Option(name: .customLong("error"), help: "Only dead letters with this x-pushworker-error code (or 'delivery_limit').") var error: String?
        @Flag(help: "Every dead letter (required when no other filter is given).") var all = false
        @Option(help: "At most this many.") var limit: Int?

        func validate() throws {
            guard all || !ids.isEmpty || error != nil else { throw ValidationError("choose dead letters with --id, --error or --all") }
        }

        func matches(_ letter: DeadLetter) -> Bool {
            (ids.isEmpty || ids.contains(letter.id)) && (error.map { $0 == letter.errorCode } ?? true)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List dead letters (id, error code, message, time, deliveries).")
        @OptionGroup var location: Location
        @Flag(help: "One JSON object per line.") var json = false

        func run() async throws {
            let (amqp, queue, _) = try location.resolve()
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            try await DeadLetterBrowser.browse(amqp, queue: queue) { letters in
                for letter in letters {
                    if json {
                        print(String(decoding: try encoder.encode(letter.listing), as: UTF8.self))
                    } else {
                        let first = letter.firstErrorCode.map { "\tfirst=\($0)" } ?? ""
                        print("\(letter.id)\t\(letter.errorCode)\t\(letter.time)\tqueue=\(letter.sourceQueue ?? "-")\tdeliveries=\(letter.deliveries)\treplays=\(letter.replays)\(first)\t\(letter.errorMessage)")
                    }
                }
                return []
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one dead letter: headers and body.")
        @OptionGroup var location: Location
        @Argument(help: "Its message id.") var id: String

        func run() async throws {
            let (amqp, queue, _) = try location.resolve()
            var found = false
            try await DeadLetterBrowser.browse(amqp, queue: queue) { letters in
                for letter in letters where letter.id == id {
                    found = true
                    let listing = letter.listing
                    print("""
                        deliveries: \(listing.deliveries)
                        error: \(listing.error)
                        first error: \(listing.firstError ?? "-")
                        id: \(listing.id)
                        message: \(listing.message)
                        queue: \(listing.queue ?? "-")
                        replays: \(listing.replays)
                        time: \(listing.time)
                        """)
                    print("body:\n" + String(decoding: letter.delivery.body, as: UTF8.self))
                }
                return []
            }
            if !found { throw CommandFailure("no dead letter with id '\(id)' in \(queue)") }
        }
    }

    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Publish dead letters back to the queue each died in (or --to), confirmed, then remove them.",
            discussion: """
                A job goes back to the jobs queue, a registry command to the registry queue: the queue \
                the worker or the broker named when it dead-lettered it (the jobs queue when none is \
                named). Headers are kept, x-pushworker-replays is counted up, and the reason moves to \
                x-pushworker-first-error, so a message that dies again shows both its first and its \
                latest reason.
                """)
        @OptionGroup var location: Location
        @OptionGroup var filter: Filter
        @Option(help: "Queue to replay into (default: the queue each dead letter died in).") var to: String?
        @Flag(name: .customLong("dry-run"), help: "Only say what would be replayed.") var dryRun = false

        func run() async throws {
            let (amqp, queue, jobs) = try location.resolve()
            let publisher = dryRun ? nil : try await AMQPPublisher.connect(amqp)
            var moved = 0
            try await DeadLetterBrowser.browse(amqp, queue: queue) { letters in
                var selected: [DeadLetter] = []
                for letter in letters where filter.matches(letter) && selected.count < (filter.limit ?? Int.max) {
                    selected.append(letter)
                }
                for letter in selected {
                    // A letter naming the dead-letter queue itself (published there by hand) would
                    // only come back: the jobs queue, as before queues were named.
                    let target = to ?? letter.sourceQueue.flatMap { $0 == queue ? nil : $0 } ?? jobs
                    print("\(dryRun ? "would replay" : "replaying") \(letter.id) (\(letter.errorCode)) to \(target)")
                    guard let publisher else { continue }
                    try await publisher.publish(letter.replay(to: target))
                    // Removed as soon as its copy is confirmed: a failure or a signal later on
                    // leaves no letter both replayed and still dead.
                    try await letter.delivery.ack()
                    moved += 1
                }
                return []
            }
            await publisher?.close()
            print(dryRun ? "dry run: nothing moved" : "replayed \(moved)")
        }
    }

    struct Purge: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete dead letters for good.")
        @OptionGroup var location: Location
        @OptionGroup var filter: Filter
        @Flag(help: "Confirm the deletion.") var yes = false

        func run() async throws {
            guard yes else { throw CommandFailure("purging deletes dead letters for good; add --yes to confirm") }
            let (amqp, queue, _) = try location.resolve()
            var purged = 0
            try await DeadLetterBrowser.browse(amqp, queue: queue) { letters in
                let selected = Array(letters.filter(filter.matches).prefix(filter.limit ?? Int.max))
                purged = selected.count
                return selected
            }
            print("purged \(purged)")
        }
    }
}
