import AMQP
import Foundation
import Testing

/// The three-node RabbitMQ cluster of `deploy/local/rabbitmq.sh cluster start`, which the test
/// command starts beside the single node. Nodes are killed and restarted through that script, as
/// an operator (or a machine failure) would.
public enum TestCluster {
    /// One URL per node, in node order (node 1 first).
    public static var urls: [String] {
        let listed = ProcessInfo.processInfo.environment["PUSHWORKER_TEST_CLUSTER_URLS"]
            ?? "amqp://guest:guest@127.0.0.1:5701/,amqp://guest:guest@127.0.0.1:5711/,amqp://guest:guest@127.0.0.1:5721/"
        return AMQPConfiguration.urls(inList: listed)
    }

    /// The nodes' URLs starting at `node` (1-based), the others after it: a client that prefers
    /// that node and fails over to the rest.
    public static func urls(preferring node: Int) -> [String] {
        let all = urls
        return Array(all[(node - 1)...] + all[..<(node - 1)])
    }

    /// YAML for a worker's `amqp:` preferring `node`, with no shuffling so the test knows where
    /// the worker is.
    public static func amqpYAML(preferring node: Int, prefetch: Int = 4) -> String {
        """
        amqp:
          urls: [\(urls(preferring: node).map { "\"\($0)\"" }.joined(separator: ", "))]
          shuffle: false
          prefetch: \(prefetch)
        """
    }

    /// A client configuration preferring `node`, failing over fast.
    public static func configuration(preferring node: Int, topology: AMQPTopology = AMQPTopology()) throws -> AMQPConfiguration {
        TestLog.bootstrap()
        var configuration = try AMQPConfiguration(urls: urls(preferring: node))
        configuration.connectTimeout = .seconds(3)
        configuration.reconnect = AMQPReconnectPolicy(initialDelay: .milliseconds(200), maximumDelay: .seconds(1))
        configuration.topology = topology
        return configuration
    }

    public static func publisher(preferring node: Int, topology: AMQPTopology = AMQPTopology()) async throws -> AMQPPublisher {
        let configuration = try configuration(preferring: node, topology: topology)
        do {
            return try await AMQPPublisher.connect(configuration)
        } catch let error as AMQPError where error.kind == .connectionFailed || error.kind == .timeout {
            Issue.record("no RabbitMQ cluster answers at \(configuration.redactedURLs) (set PUSHWORKER_TEST_CLUSTER_URLS, or run deploy/local/rabbitmq.sh cluster start): \(error)")
            throw error
        }
    }

    public static func consumer(queue: String, preferring node: Int, prefetch: UInt16 = 1000, topology: AMQPTopology = AMQPTopology()) async throws -> AMQPConsumer {
        try await AMQPConsumer.connect(try configuration(preferring: node, topology: topology), queue: queue, prefetch: prefetch)
    }

    /// Starts whatever node is down and waits until all three run: each test begins whole.
    public static func ensureRunning() async throws { try await script("start") }
    /// SIGKILL of node `n`'s Erlang VM: the machine is gone, no goodbye to any client.
    public static func kill(_ n: Int) async throws { try await script("kill", "\(n)") }
    /// A clean stop and start of node `n`, once stopping it leaves every quorum queue a majority.
    public static func restart(_ n: Int) async throws { try await script("restart", "\(n)") }
    public static func start(_ n: Int) async throws { try await script("start-node", "\(n)") }

    /// The node (1-3) leading quorum queue `queue`, from the broker's own listing.
    public static func leader(of queue: String) async throws -> Int? {
        let output = try await run([scriptPath, "cluster", "ctl", "1", "list_queues", "name", "leader", "--no-table-headers", "--quiet"])
        for line in output.split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == "\t" || $0 == " " })
            guard fields.count == 2, fields[0] == queue else { continue }
            return Int(fields[1].dropFirst("pushworker-".count).prefix(1))
        }
        return nil
    }

    static let scriptPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../deploy/local/rabbitmq.sh").standardized.path

    private static func script(_ arguments: String...) async throws {
        _ = try await run([scriptPath, "cluster"] + arguments)
    }

    /// Runs a command to its end, its output in a file rather than a pipe: a node the script
    /// starts in the background keeps the script's standard output, and a pipe would not end
    /// until the node did.
    @discardableResult
    private static func run(_ command: [String]) async throws -> String {
        try await onOwnThread { try runHere(command) }
    }

    private static func runHere(_ command: [String]) throws -> String {
        let outputFile = FileManager.default.temporaryDirectory.appendingPathComponent("cluster-\(UUID().uuidString.prefix(8)).out")
        defer { try? FileManager.default.removeItem(at: outputFile) }
        let process = try ChildProcess(command[0], arguments: Array(command.dropFirst()), output: .file(outputFile.path), error: .standardOutput)
        process.waitUntilExit()
        let text = (try? String(contentsOf: outputFile, encoding: .utf8)) ?? ""
        guard process.terminationStatus == 0 else {
            let how = process.wasSignalled ? "was killed by signal" : "exited"
            throw TestFailure("\(command.joined(separator: " ")) \(how) \(process.terminationStatus): \(text)")
        }
        return text
    }
}
