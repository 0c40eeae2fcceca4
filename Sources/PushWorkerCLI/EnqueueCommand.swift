import AMQP
import ArgumentParser
import CommandLineSupport
import Foundation
import PushWorker

/// Publishes one JSON document, the way a producer would: persistent, confirmed, and refused
/// outright when it is not JSON or no queue would take it.
struct EnqueueCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enqueue",
        abstract: "Publish a JSON document (a push job) and print its message id.",
        discussion: "Reads the document from --file or standard input. Nothing is published unless it is valid JSON; the command returns once the broker has confirmed the message.")

    @OptionGroup var amqp: AMQPOptions

    @Option(help: "Publish to this queue through the default exchange.")
    var queue: String?

    @Option(help: "Publish to this exchange (with --routing-key).")
    var exchange: String?

    @Option(name: .customLong("routing-key"), help: "Routing key for --exchange.")
    var routingKey: String?

    @Option(help: "Read the document from this file instead of standard input.")
    var file: String?

    @Option(name: .customLong("message-id"), help: "Message id to set; default: a new UUID.")
    var messageID: String?

    @Flag(name: .customLong("declare-queue"), help: "Declare --queue as a durable quorum queue first, if it does not exist.")
    var declareQueue = false

    func validate() throws {
        switch (queue, exchange, routingKey) {
        case (.some, nil, nil), (nil, .some, .some): break
        case (.some, _, _): throw ValidationError("give either --queue, or --exchange with --routing-key, not both")
        case (nil, .some, nil): throw ValidationError("--exchange needs --routing-key")
        case (nil, nil, .some): throw ValidationError("--routing-key needs --exchange")
        case (nil, nil, nil): throw ValidationError("say where to publish: --queue Q, or --exchange E --routing-key K")
        }
        if declareQueue && queue == nil { throw ValidationError("--declare-queue needs --queue") }
    }

    func run() async throws {
        let source = file ?? "standard input"
        let document: Data
        do {
            document = try file.map { try Data(contentsOf: URL(fileURLWithPath: $0)) } ?? FileHandle.standardInput.readDataToEndOfFile()
        } catch {
            throw CommandFailure("cannot read \(source): \(error.localizedDescription)")
        }
        do {
            try JSONSyntaxError.check(document)
        } catch {
            throw CommandFailure("\(source) is \(error); nothing was published")
        }

        let id = messageID ?? UUID().uuidString.lowercased()
        let properties = AMQPProperties(
            contentType: "application/json", persistent: true, messageID: id,
            timestamp: UInt64(Date().timeIntervalSince1970))
        // Mandatory: a message no queue takes is an error to report, not a silent loss.
        let message = AMQPMessage(
            exchange: exchange ?? "", routingKey: routingKey ?? queue ?? "", body: Array(document),
            properties: properties, mandatory: true)
        var configuration = try amqp.configuration()
        configuration.connectionName = "pushworker enqueue"
        if declareQueue, let queue {
            configuration.topology = AMQPTopology(queues: [.durable(queue, quorum: true)])
        }
        let publisher = try await AMQPPublisher.connect(configuration)
        do {
            try await publisher.publish(message)
        } catch {
            await publisher.close()
            throw error
        }
        await publisher.close()
        print(id)
    }
}
