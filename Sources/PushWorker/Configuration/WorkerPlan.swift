import AMQP
import APNs
import APNsHTTP2
import Foundation
import SecretEnvironment

/// The configuration checked once into what the worker and every command run with: the broker
/// with its complete topology, each app's client configuration (credentials read and checked),
/// lanes, retry and the registry settings, and the operator endpoint. Nothing else derives a
/// broker or client configuration from the file, so `config check` checks exactly what `run` runs.
public struct WorkerPlan: Sendable {
    /// One configured app, its credentials read.
    public struct App: Sendable {
        public let configuration: AppConfiguration
        /// Its position in `apps`, for errors that name `apps[INDEX]`.
        public let index: Int
        /// The HTTP/2 client's configuration; a token app holds its own provider-token source
        /// until the assembly shares one per key.
        public let client: APNsClientConfiguration
        /// Concurrent requests at most, and the share of them kept for the now lane.
        public let maxInFlight: Int
        public let nowReserve: Int
        /// The app's bulk queue and how many of its chunks a worker holds at once (prefetch × weight).
        public let bulkQueue: String
        public let bulkPrefetch: UInt16
        /// Its FCM side, the service account read and proved; nil for an app on APNs only.
        public let fcm: FCMPlan?

        public var name: String { configuration.name }
        public var topic: String { configuration.topic }
        /// Channels belong to the bundle id: the topic without a push type's suffix.
        public var bundleID: String { APNsChannel.bundleID(ofTopic: configuration.topic) }
    }

    /// Where `/metrics`, `/healthz` and `/readyz` listen, and the key it came from, for errors.
    public struct Endpoint: Sendable {
        public let host: String
        public let port: Int
        public let key: String
    }

    public let file: String
    public let configuration: PushWorkerConfiguration
    public let broker: BrokerPlan
    public let apps: [App]
    public let endpoint: Endpoint?
    /// The `/deliveries` page's bearer token, read from `ledger.page_token_env`; nil: no page.
    /// Held for comparing only: never printed.
    public let deliveriesPageToken: String?

    public var settings: WorkerSettings { configuration.worker }

    /// Checks everything `run` checks before it connects; the first problem names the file and key.
    public init(
        _ configuration: PushWorkerConfiguration, file: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) {
        let settings = configuration.worker
        self.file = file
        self.configuration = configuration
        broker = try BrokerPlan(settings, apps: configuration.apps.map(\.name), file: file, environment: environment)
        for (index, app) in configuration.apps.enumerated() where !app.caps.isEmpty {
            // Counted per user, in the ledger's store: both are needed.
            guard settings.registry != nil else {
                throw ConfigurationError(file: file, key: "apps[\(index)].caps", "frequency caps count per user, and users are known only with a registry (registry:)")
            }
            guard settings.ledger.enabled else {
                throw ConfigurationError(file: file, key: "apps[\(index)].caps", "frequency caps are counted in the delivery ledger's store, and ledger is off")
            }
        }
        var apps: [App] = []
        for (index, app) in configuration.apps.enumerated() {
            let client = try app.clientConfiguration(file: file, index: index, environment: environment)
            apps.append(App(
                configuration: app, index: index, client: client, maxInFlight: app.effectiveMaxInFlight,
                nowReserve: settings.lanes.nowReserve(ofMaxInFlight: app.effectiveMaxInFlight),
                bulkQueue: settings.queues.bulkJobs(app: app.name),
                bulkPrefetch: UInt16(min(settings.amqp.prefetch * (app.weight ?? 1), Int(UInt16.max))),
                fcm: try app.fcm?.plan(file: file, prefix: "apps[\(index)]", app: app.name, proxy: app.proxy, environment: environment)))
        }
        self.apps = apps
        endpoint = try settings.metricsEndpoint(file: file, environment: environment).map { Endpoint(host: $0.host, port: $0.port, key: $0.key) }
        try Self.checkLedger(settings.ledger, file: file)
        deliveriesPageToken = try Self.pageToken(settings, endpoint: endpoint, file: file, environment: environment)
    }

    /// The page's token: a variable that is set, long enough to resist guessing, on an endpoint
    /// that serves, with a ledger to show.
    private static func pageToken(
        _ settings: WorkerSettings, endpoint: Endpoint?, file: String, environment: [String: String]
    ) throws(ConfigurationError) -> String? {
        guard let variable = settings.ledger.pageTokenEnv else { return nil }
        let key = "ledger.page_token_env"
        guard endpoint != nil else { throw ConfigurationError(file: file, key: key, "the /deliveries page is served on metrics_address, which is null") }
        let value: String?
        do { value = try SecretEnvironment.value(of: variable, in: environment) } catch { throw ConfigurationError(file: file, key: key, error.message) }
        guard let token = value, !token.isEmpty else {
            throw ConfigurationError(file: file, key: key, "environment variable \(variable) is not set (nor \(variable)_FILE)")
        }
        guard token.utf8.count >= 16 else {
            throw ConfigurationError(file: file, key: key, "\(variable) holds \(token.utf8.count) characters; the page's bearer token needs at least 16")
        }
        return token
    }

    /// Loads and checks the file.
    public static func load(file: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> WorkerPlan {
        try WorkerPlan(PushWorkerConfiguration.load(file: file), file: file, environment: environment)
    }

    /// The app `name` names, or the only one when `name` is nil.
    public func app(named name: String?) -> App? {
        guard let (index, _) = configuration.app(named: name) else { return nil }
        return apps[index]
    }
}
