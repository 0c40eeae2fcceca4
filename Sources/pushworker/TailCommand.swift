import AMQP
import ArgumentParser
import Foundation

/// Prints messages from a queue (results, dead letters) and acknowledges them: a window onto
/// what the worker produces, for demos and first-line debugging.
struct TailCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tail",
        abstract: "Print (and remove) messages from a queue, such as push.results or push.dead.")

    @OptionGroup var amqp: AMQPOptions
    @Option(help: "Queue to read.") var queue: String
    @Option(help: "Stop after this many messages.") var count: Int?
    @Option(help: "Stop after this many seconds without a message.") var idle = 10
    @Flag(help: "Print the headers too (x-pushworker-error…).") var headers = false

    func run() async throws {
        let consumer = try await AMQPConsumer.connect(try amqp.configuration(), queue: queue, prefetch: 100)
        var printed = 0
        while count.map({ printed < $0 }) ?? true {
            guard let delivery = try await consumer.next(waitingAtMost: .seconds(idle)) else { break }
            var line = "[\(delivery.properties.type ?? "message")] "
            if headers, let table = delivery.properties.headers {
                line += table.keys.sorted().compactMap { key in table[key]?.stringValue.map { "\(key)=\($0)" } }.joined(separator: " ") + " "
            }
            print(line + String(decoding: delivery.body.prefix(2000), as: UTF8.self))
            try await delivery.ack()
            printed += 1
        }
        await consumer.close()
    }
}
