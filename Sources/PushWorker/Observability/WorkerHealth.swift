import AMQP
import FCMHTTP2
import OperatorEndpoint
import Stores
import Synchronization

/// What `/readyz` reports: the broker connections up with the topology declared on them, every
/// app's credentials loaded (and FCM's last grant not refused), the registry answering. Connections report their own changes (the
/// AMQP I/O threads call in); the registry is asked when the probe comes.
public final class WorkerHealth: Sendable {
    private struct Connection {
        var name: String
        /// nil while connected.
        var problem: String?
        var declared = false
        /// The node connected to (password masked), or last connected to.
        var node: String?
    }

    private struct State {
        var connections: [Connection] = []
        var appsProblem: String? = "credentials not loaded yet"
        var registry: (any RegistryStore)?
        /// A registry is configured but not open yet (PostgreSQL may take its connect timeout).
        var registryOpening = false
        /// FCM's access token sources: a refused grant is the app's credentials failing.
        var fcm: [FCMAccessTokenSource] = []
    }

    private let state = Mutex(State())
    private let metrics: WorkerMetrics

    public init(metrics: WorkerMetrics = WorkerMetrics()) {
        self.metrics = metrics
    }

    /// Registers a broker connection that must be up to be ready, and returns what its
    /// configuration's `onConnectionEvent` should be.
    func observe(connection name: String) -> @Sendable (AMQPConnectionEvent) -> Void {
        state.withLock { $0.connections.append(Connection(name: name, problem: "not connected yet")) }
        return { [self] event in
            state.withLock { state in
                guard let index = state.connections.firstIndex(where: { $0.name == name }) else { return }
                switch event {
                case .connected(_, let address, _):
                    state.connections[index].problem = nil
                    state.connections[index].declared = true
                    state.connections[index].node = address.redactedURL
                case .lost(let error):
                    state.connections[index].problem = "connection lost, reconnecting: \(error)"
                case .attemptFailed(let error):
                    state.connections[index].problem = "cannot connect: \(error)"
                }
            }
            if case .connected(reconnected: true, let address, let failover) = event {
                metrics.reconnected(name)
                if failover { metrics.failedOver(name, to: address.node) }
            }
        }
    }

    /// `amqp` for one of the worker's connections: named `name` in the broker's UI, waiting for a
    /// broker not reachable yet, and observed as `label` for readiness and the reconnect counter.
    public func observed(_ amqp: AMQPConfiguration, name: String, as label: String) -> AMQPConfiguration {
        var configuration = amqp
        configuration.connectionName = name
        configuration.waitsForBroker = true
        configuration.onConnectionEvent = observe(connection: label)
        return configuration
    }

    public func appsLoaded() {
        state.withLock { $0.appsProblem = nil }
    }

    /// Reports each service account whose last grant Google refused as not ready (`fcm`), until
    /// a grant succeeds: the worker still sends to APNs, but its Android devices get nothing.
    public func watch(fcm sources: [FCMAccessTokenSource]) {
        state.withLock { $0.fcm = sources }
    }

    public func registryOpening() {
        state.withLock { $0.registryOpening = true }
    }

    public func watch(registry: any RegistryStore) {
        state.withLock {
            $0.registry = registry
            $0.registryOpening = false
        }
    }

    /// How long the registry may take to answer a probe before it counts as unreachable.
    static let registryProbeLimit: Duration = .seconds(2)

    public func report() async -> ReadinessReport {
        let (connections, appsProblem, registry, registryOpening, fcm) = state.withLock {
            ($0.connections, $0.appsProblem, $0.registry, $0.registryOpening, $0.fcm)
        }
        let down = connections.filter { $0.problem != nil }
        let undeclared = connections.filter { !$0.declared }
        var checks = [
            ReadinessReport.Check("broker", problem: connections.isEmpty
                ? "not connected yet"
                : down.isEmpty ? nil : down.map { "\($0.name): \($0.problem!)" }.joined(separator: "; "),
                detail: Self.nodes(connections)),
            ReadinessReport.Check("topology", problem: connections.isEmpty
                ? "not declared yet"
                : undeclared.isEmpty ? nil : "not declared yet on \(undeclared.map(\.name).joined(separator: ", "))"),
            ReadinessReport.Check("apps", problem: appsProblem),
        ]
        if !fcm.isEmpty {
            var refused: [String] = []
            for source in fcm {
                if let refusal = await source.refusal { refused.append("\(source.account.clientEmail) (project \(source.account.projectID)): \(refusal)") }
            }
            checks.append(ReadinessReport.Check("fcm", problem: refused.isEmpty ? nil : refused.sorted().joined(separator: "; ")))
        }
        if let registry {
            checks.append(ReadinessReport.Check("registry", problem: await Self.probe(registry)))
        } else if registryOpening {
            checks.append(ReadinessReport.Check("registry", problem: "opening the store"))
        }
        return ReadinessReport(checks)
    }

    /// "jobs → amqp://…@host:5711/, results → …": where each connection is (or was last).
    private static func nodes(_ connections: [Connection]) -> String? {
        let named = connections.compactMap { connection in connection.node.map { "\(connection.name) → \($0)" } }
        return named.isEmpty ? nil : named.joined(separator: ", ")
    }

    /// A primary-key read of the kind jobs make: the store answers, within the limit. The read is
    /// not awaited past the limit (a store that hangs must not hang the probe too).
    private static func probe(_ registry: any RegistryStore) async -> String? {
        await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
            let answer = FirstAnswer(continuation)
            Task {
                do {
                    _ = try await registry.device(app: "", token: "")
                    answer.give(nil)
                } catch {
                    answer.give("not answering: \((error as? StoreError)?.message ?? "\(error)")")
                }
            }
            Task {
                try? await Task.sleep(for: registryProbeLimit)
                answer.give("no answer within \(registryProbeLimit)")
            }
        }
    }
}

/// Resumes a continuation with the first answer given; later ones are dropped.
private final class FirstAnswer: Sendable {
    private let waiting: Mutex<CheckedContinuation<String?, Never>?>

    init(_ continuation: CheckedContinuation<String?, Never>) {
        waiting = Mutex(continuation)
    }

    func give(_ problem: String?) {
        waiting.withLock { $0.take() }?.resume(returning: problem)
    }
}
