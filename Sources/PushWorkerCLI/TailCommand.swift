import AMQP
import ArgumentParser
import CommandLineSupport
import Foundation
import UnixSignals

/// Prints messages from a queue (results, dead letters) and acknowledges them: a window onto
/// what the worker produces, for demos and first-line debugging.
///
/// A message is removed only once its line has reached standard output: each line is written
/// with one unbuffered write before its acknowledgement, so output sent to a file holds every
/// message the queue lost, even when the command is stopped. SIGINT and SIGTERM stop it after the
/// message in hand (a second one at once); what it had not printed stays in the queue.
struct TailCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tail",
        abstract: "Print (and remove) messages from a queue, such as push.results or push.dead.",
        discussion: """
            Each message is acknowledged only after its line is written, so nothing is removed \
            that was not printed. SIGINT or SIGTERM stops after the message in hand.
            """)

    @OptionGroup var amqp: AMQPOptions
    @Option(help: "Queue to read.") var queue: String
    @Option(help: "Stop after this many messages.") var count: Int?
    @Option(help: "Stop after this many seconds without a message.") var idle = 10
    @Flag(help: "Print the headers too (x-pushworker-error…).") var headers = false

    func run() async throws {
        // Trapped before anything is consumed: from here on a signal only asks the loop to stop.
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        // A small window: the broker hands over no more than the command can print before a
        // signal is acted on, and what it had sent but was not printed goes back on close.
        let consumer = try await AMQPConsumer.connect(try amqp.configuration(), queue: queue, prefetch: 10)
        let reader = Task { try await printMessages(from: consumer) }
        let watcher = Task {
            var received = 0
            for await _ in signals {
                received += 1
                // A second signal does not wait (a hung connection): what was not acknowledged
                // goes back to the queue anyway.
                if received > 1 { Foundation.exit(130) }
                reader.cancel()
            }
        }
        defer { watcher.cancel() }
        let outcome = await reader.result
        await consumer.close()
        try outcome.get()
    }

    /// Prints and acknowledges until the count, an idle spell or cancellation (a signal).
    private func printMessages(from consumer: AMQPConsumer) async throws {
        var printed = 0
        while count.map({ printed < $0 }) ?? true, !Task.isCancelled {
            let next: AMQPDelivery?
            do {
                next = try await consumer.next(waitingAtMost: .seconds(idle))
            } catch is CancellationError {
                break
            }
            guard let delivery = next else { break }
            var prefix = "[\(delivery.properties.type ?? "message")] "
            if headers, let table = delivery.properties.headers {
                prefix += table.keys.sorted().compactMap { key in table[key]?.stringValue.map { "\(key)=\($0)" } }.joined(separator: " ") + " "
            }
            var line = ""
            if delivery.properties.type == "results", let results = Self.batchedResults(delivery.body), !results.isEmpty {
                // A `results: batched` message: a line per device, as `results: all` would print.
                let headerText = prefix.dropFirst("[results] ".count)
                for result in results { line += "[result] " + headerText + result + "\n" }
            } else {
                line = prefix + String(decoding: delivery.body.prefix(2000), as: UTF8.self) + "\n"
            }
            // One write(2), not print's buffer: a line the process still buffered would be lost
            // with the process while its message was already acknowledged.
            try FileHandle.standardOutput.write(contentsOf: Data(line.utf8))
            try await delivery.ack()
            printed += 1
        }
    }

    /// The results of a `results` message, each written back as one line; nil when the body is
    /// not such a message (it is then printed as it came).
    static func batchedResults(_ body: [UInt8]) -> [String]? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
            let results = object["results"] as? [Any],
            // JSONSerialization stops the process on a value that is not an object or array.
            results.allSatisfy({ $0 is [String: Any] })
        else { return nil }
        return results.compactMap { result in
            (try? JSONSerialization.data(withJSONObject: result, options: [.sortedKeys, .withoutEscapingSlashes])).map { String(decoding: $0, as: UTF8.self) }
        }
    }
}
