import AMQP
import ArgumentParser
import Foundation

/// The broker to talk to; the URL may carry a password, so it also comes from the environment.
struct AMQPOptions: ParsableArguments {
    @Option(name: .customLong("amqp"), help: "Broker URL, amqp:// or amqps://. Default: $PUSHWORKER_AMQP_URL, else amqp://guest:guest@127.0.0.1:5672/")
    var url: String?

    func configuration() throws -> AMQPConfiguration {
        let url = url ?? ProcessInfo.processInfo.environment["PUSHWORKER_AMQP_URL"] ?? "amqp://guest:guest@127.0.0.1:5672/"
        return try AMQPConfiguration(url: url)
    }
}
