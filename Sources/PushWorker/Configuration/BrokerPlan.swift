import AMQP
import Foundation

/// The broker as the configuration describes it, checked once: the nodes (the environment's URL
/// winning over the file's), the connection settings, and the complete topology the workers
/// declare, every app's bulk queue included. Every program that talks to the broker starts here,
/// so no two of them can disagree on a queue's arguments.
public struct BrokerPlan: Sendable {
    /// The connection settings with the complete topology.
    public let amqp: AMQPConfiguration
    /// The names and settings the topology came from.
    public let settings: WorkerSettings

    /// - Parameter apps: the configured apps' names, each with a bulk queue of its own.
    public init(
        _ settings: WorkerSettings, apps: [String], file: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) {
        var amqp = try settings.amqpConfiguration(file: file, environment: environment)
        amqp.topology.queues += settings.bulkQueues(apps: apps)
        self.amqp = amqp
        self.settings = settings
    }

    /// A connection that declares the topology (the first of a worker's), named for the broker's
    /// connection list.
    public func declaring(_ name: String) -> AMQPConfiguration {
        var configuration = amqp
        configuration.connectionName = name
        return configuration
    }

    /// A connection that declares nothing: a tool reading or moving what the workers declared.
    public func undeclared(_ name: String) -> AMQPConfiguration {
        var configuration = declaring(name)
        configuration.topology = AMQPTopology()
        return configuration
    }
}
