import AMQP
import ArgumentParser
import Foundation

/// The broker to talk to; the URL may carry a password, so it also comes from the environment.
public struct AMQPOptions: ParsableArguments, Sendable {
    @Option(name: .customLong("amqp"), help: "Broker URL, amqp:// or amqps://; a cluster's nodes comma-separated. Default: $PUSHWORKER_AMQP_URL, else amqp://guest:guest@127.0.0.1:5672/")
    public var url: String?

    public init() {}

    /// The URL in force: the option, else the environment, else the local broker.
    public var resolvedURL: String {
        url ?? ProcessInfo.processInfo.environment["PUSHWORKER_AMQP_URL"] ?? "amqp://guest:guest@127.0.0.1:5672/"
    }

    /// Every node listed, tried in a random order: one command's connection goes to any node
    /// that answers.
    public func configuration() throws -> AMQPConfiguration {
        try AMQPConfiguration(urls: AMQPConfiguration.urls(inList: resolvedURL), shuffled: true)
    }
}
