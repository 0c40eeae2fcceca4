import AMQP
import ArgumentParser
import Foundation

/// The broker to talk to; the URL may carry a password, so it also comes from the environment.
struct AMQPOptions: ParsableArguments {
    @Option(name: .customLong("amqp"), help: "Broker URL, amqp:// or amqps://. Default: $PUSHWORKER_AMQP_URL, else amqp://guest:guest@127.0.0.1:5672/")
    var url: String?

    /// The URL in force: the option, else the environment, else the local broker.
    var resolvedURL: String {
        url ?? ProcessInfo.processInfo.environment["PUSHWORKER_AMQP_URL"] ?? "amqp://guest:guest@127.0.0.1:5672/"
    }

    func configuration() throws -> AMQPConfiguration {
        try AMQPConfiguration(url: resolvedURL)
    }
}
