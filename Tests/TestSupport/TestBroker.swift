import AMQP
import Foundation
import Synchronization
import Testing

/// The real RabbitMQ the tests run against, as `deploy/local/rabbitmq.sh start` sets it up.
public enum TestBroker {
    public static var url: String {
        ProcessInfo.processInfo.environment["PUSHWORKER_TEST_AMQP_URL"] ?? "amqp://guest:guest@127.0.0.1:5672/"
    }

    public static var tlsURL: String {
        ProcessInfo.processInfo.environment["PUSHWORKER_TEST_AMQPS_URL"]
            ?? "amqps://guest:guest@localhost:5671/?cacertfile=/tmp/pushworker-rabbitmq-5672/tls/ca.pem"
    }

    public static var node: String {
        ProcessInfo.processInfo.environment["PUSHWORKER_TEST_RABBITMQ_NODE"] ?? "rabbit@localhost"
    }

    /// The broker's configuration with short timeouts and fast reconnects, so a failing test fails
    /// in seconds rather than minutes.
    public static func configuration(topology: AMQPTopology = AMQPTopology()) throws -> AMQPConfiguration {
        TestLog.bootstrap()
        var configuration = try AMQPConfiguration(url: url)
        configuration.connectTimeout = .seconds(3)
        configuration.reconnect = AMQPReconnectPolicy(initialDelay: .milliseconds(200), maximumDelay: .seconds(1))
        configuration.topology = topology
        return configuration
    }

    /// Connects a publisher, turning "no broker" into a failure that says what to do, never a skip.
    public static func publisher(topology: AMQPTopology = AMQPTopology()) async throws -> AMQPPublisher {
        let configuration = try configuration(topology: topology)
        do {
            return try await whileClusterForms { try await AMQPPublisher.connect(configuration) }
        } catch let error as AMQPError where error.kind == .connectionFailed || error.kind == .timeout {
            Issue.record("no RabbitMQ answers at \(configuration.redactedURL) (set PUSHWORKER_TEST_AMQP_URL, or run deploy/local/rabbitmq.sh start): \(error)")
            throw error
        }
    }

    public static func consumer(queue: String, prefetch: UInt16 = 100, topology: AMQPTopology = AMQPTopology()) async throws -> AMQPConsumer {
        let configuration = try configuration(topology: topology)
        return try await whileClusterForms { try await AMQPConsumer.connect(configuration, queue: queue, prefetch: prefetch) }
    }

    /// Runs `connect` again while the broker answers that it could not elect a new quorum queue's
    /// leader in time, as a node busy with many tests' queues at once does. The worker waits the
    /// same way (its connections wait for the broker); these clients do not, so a test that
    /// expects a refusal still sees it at once.
    public static func whileClusterForms<T>(_ connect: () async throws -> T) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await connect()
            } catch let error as AMQPError where error.isClusterNotFormed && attempt < 5 {
                attempt += 1
                try await Task.sleep(for: .milliseconds(500))
            }
        }
    }

    /// A queue name no other test uses.
    public static func uniqueName(_ prefix: String) -> String {
        "test.\(prefix).\(UUID().uuidString.prefix(8).lowercased())"
    }

    /// Test queues delete themselves a while after the test stops using them.
    public static let expiry: AMQPTable = ["x-expires": .int64(300_000)]

    /// Runs `rabbitmqctl` against the test node, failing the test with its output if it fails.
    public static func rabbitmqctl(_ arguments: String...) async throws {
        let result = try await Program.running(["-n", node] + arguments, program: URL(fileURLWithPath: "/usr/sbin/rabbitmqctl"))
        guard result.status == 0 else {
            throw TestFailure("rabbitmqctl \(arguments.joined(separator: " ")) failed: \(result.standardError)\(result.standardOutput)")
        }
    }
}

public struct TestFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Fails instead of hanging when `operation` takes longer than `limit`. The operation is then
/// cancelled but not waited for: one that goes on regardless (a connection waiting for its
/// broker) would hold the test for as long as it runs, as a task group's wait for its children
/// would.
public func withTimeout<T: Sendable>(_ limit: Duration, _ what: String, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
    // The first to finish the stream decides; later finishes are ignored.
    let (first, decide) = AsyncThrowingStream<T, any Error>.makeStream()
    let work = Task {
        do {
            decide.yield(try await operation())
            decide.finish()
        } catch {
            decide.finish(throwing: error)
        }
    }
    let timer = Task {
        try await Task.sleep(for: limit)
        decide.finish(throwing: TestFailure("timed out after \(limit): \(what)"))
    }
    defer {
        work.cancel()
        timer.cancel()
    }
    for try await value in first { return value }
    throw CancellationError()  // the stream ends without a value only when the test is cancelled
}

extension AMQPConsumer {
    /// The next delivery, or a failure if none comes within `limit`.
    public func next(within limit: Duration = .seconds(10)) async throws -> AMQPDelivery {
        guard let delivery = try await next(waitingAtMost: limit) else {
            throw TestFailure("no delivery within \(limit), or the delivery stream ended")
        }
        return delivery
    }
}

/// A value shared between test tasks.
public final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    public init(_ value: Value) { mutex = Mutex(value) }
    public func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }
    public var value: Value { mutex.withLock { $0 } }
}
