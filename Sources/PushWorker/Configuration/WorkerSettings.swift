import AMQP
import Foundation

/// The worker's broker, queue names and limits. Every field has a default, so a configuration
/// file may hold only `apps`.
public struct WorkerSettings: Sendable, Decodable, Equatable {
    public struct Broker: Sendable, Decodable, Equatable {
        /// amqp:// or amqps://; `PUSHWORKER_AMQP_URL` overrides it, so the password can stay out
        /// of the file.
        public var url: String = "amqp://guest:guest@127.0.0.1:5672/"
        /// Jobs taken from the broker at once; also the number processed concurrently.
        public var prefetch: Int = 16
        public var heartbeatSeconds: Int = 30

        enum CodingKeys: String, CodingKey {
            case url, prefetch
            case heartbeatSeconds = "heartbeat_seconds"
        }

        public init() {}

        public init(from decoder: Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            url = try container.decodeIfPresent(String.self, forKey: .url) ?? url
            prefetch = try container.decodeIfPresent(Int.self, forKey: .prefetch) ?? prefetch
            heartbeatSeconds = try container.decodeIfPresent(Int.self, forKey: .heartbeatSeconds) ?? heartbeatSeconds
        }
    }

    /// Names of everything the worker declares, so several deployments can share a vhost.
    public struct Names: Sendable, Decodable, Equatable {
        public var exchange = "push"
        public var jobsRoutingKey = "jobs"
        public var jobs = "push.jobs"
        public var deadLetterExchange = "push.dlx"
        public var deadLetters = "push.dead"
        public var results = "push.results"
        /// Deliveries of one job before the broker dead-letters it as poison.
        public var deliveryLimit = 5

        enum CodingKeys: String, CodingKey {
            case exchange, jobs, results
            case jobsRoutingKey = "jobs_routing_key"
            case deadLetterExchange = "dead_letter_exchange"
            case deadLetters = "dead_letters"
            case deliveryLimit = "delivery_limit"
        }

        public init() {}

        public init(from decoder: Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            exchange = try container.decodeIfPresent(String.self, forKey: .exchange) ?? exchange
            jobsRoutingKey = try container.decodeIfPresent(String.self, forKey: .jobsRoutingKey) ?? jobsRoutingKey
            jobs = try container.decodeIfPresent(String.self, forKey: .jobs) ?? jobs
            deadLetterExchange = try container.decodeIfPresent(String.self, forKey: .deadLetterExchange) ?? deadLetterExchange
            deadLetters = try container.decodeIfPresent(String.self, forKey: .deadLetters) ?? deadLetters
            results = try container.decodeIfPresent(String.self, forKey: .results) ?? results
            deliveryLimit = try container.decodeIfPresent(Int.self, forKey: .deliveryLimit) ?? deliveryLimit
        }

        /// Everything declared at start-up and after every reconnect.
        public var topology: AMQPTopology {
            AMQPTopology(
                exchanges: [.init(exchange, type: "topic"), .init(deadLetterExchange, type: "fanout")],
                queues: [
                    .durable(jobs, quorum: true, deliveryLimit: deliveryLimit, deadLetterExchange: deadLetterExchange),
                    .durable(deadLetters, quorum: true),
                    .durable(results, quorum: true),
                ],
                bindings: [
                    .init(queue: jobs, exchange: exchange, routingKey: jobsRoutingKey),
                    .init(queue: deadLetters, exchange: deadLetterExchange, routingKey: ""),
                ])
        }
    }

    public var amqp = Broker()
    public var queues = Names()
    public var retryMaxAttempts = 3
    /// Devices above which a job is split into chunk jobs that any worker can take.
    public var chunkSize = 1000
    public var retryInitialDelayMilliseconds = 200
    /// Seconds a worker takes to finish what it holds after SIGTERM.
    public var shutdownGraceSeconds = 30

    enum CodingKeys: String, CodingKey {
        case amqp, queues
        case chunkSize = "chunk_size"
        case retryMaxAttempts = "retry_max_attempts"
        case retryInitialDelayMilliseconds = "retry_initial_delay_ms"
        case shutdownGraceSeconds = "shutdown_grace_seconds"
    }

    public init() {}

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        amqp = try container.decodeIfPresent(Broker.self, forKey: .amqp) ?? amqp
        queues = try container.decodeIfPresent(Names.self, forKey: .queues) ?? queues
        retryMaxAttempts = try container.decodeIfPresent(Int.self, forKey: .retryMaxAttempts) ?? retryMaxAttempts
        chunkSize = try container.decodeIfPresent(Int.self, forKey: .chunkSize) ?? chunkSize
        retryInitialDelayMilliseconds = try container.decodeIfPresent(Int.self, forKey: .retryInitialDelayMilliseconds) ?? retryInitialDelayMilliseconds
        shutdownGraceSeconds = try container.decodeIfPresent(Int.self, forKey: .shutdownGraceSeconds) ?? shutdownGraceSeconds
    }

    /// The broker configuration, with the environment's URL winning over the file's.
    public func amqpConfiguration(file: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> AMQPConfiguration {
        let url = environment["PUSHWORKER_AMQP_URL"] ?? amqp.url
        var configuration: AMQPConfiguration
        do { configuration = try AMQPConfiguration(url: url) } catch {
            throw ConfigurationError(file: file, key: environment["PUSHWORKER_AMQP_URL"] != nil ? "PUSHWORKER_AMQP_URL" : "amqp.url", "\(error)")
        }
        guard (1...10_000).contains(amqp.prefetch) else {
            throw ConfigurationError(file: file, key: "amqp.prefetch", "\(amqp.prefetch) is not between 1 and 10000")
        }
        configuration.heartbeat = .seconds(amqp.heartbeatSeconds)
        configuration.topology = queues.topology
        return configuration
    }
}
