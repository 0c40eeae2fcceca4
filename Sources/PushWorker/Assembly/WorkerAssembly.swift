import APNs
import CoreMetrics
import Logging
import Registry
import RegistryAuth
import ServiceLifecycle

/// The composition root: the one place a worker is put together. It turns the checked plan
/// into the parts — per app one sender, one admission and one channel manager, and one
/// provider-token source per key whoever uses it (pushes, channel management, the fleet's
/// agreement) — and the services that take them ready and connect in `run()`: the worker and,
/// with a registry, the registry service. A new service is added here and nowhere else.
///
/// Tests build it too, with scripted APNs parts, and run a lane's pipeline against a recording
/// publisher (`pipeline(_:publisher:)`), as hummingbird's tests call `buildApplication`.
public struct WorkerAssembly: Sendable {
    public let plan: WorkerPlan
    public let apps: [AppParts]
    /// One source per key and team.
    public let tokenSources: ProviderTokenSources
    public let registry: RegistryResolver?
    public let authorizer: CommandAuthorizer?
    public let connections: WorkerConnections
    public let metrics: WorkerMetrics
    public let health: WorkerHealth
    public let logger: Logger

    /// Builds the parts from the plan and the registry it names, opened (and its schema migrated).
    public static func build(
        _ plan: WorkerPlan, apns: APNsParts = .http2, metrics: WorkerMetrics = WorkerMetrics(), health: WorkerHealth = WorkerHealth(), logger: Logger
    ) async throws -> WorkerAssembly {
        if plan.settings.registry != nil { health.registryOpening() }
        let store = try await plan.configuration.openRegistryStore(file: plan.file, logger: logger)
        let authorizer = try await plan.configuration.registryAuthorizer(file: plan.file)
        if let store { health.watch(registry: store) }
        return WorkerAssembly(
            plan, apns: apns, registry: store.map { RegistryResolver(store: $0, logger: logger) }, authorizer: authorizer,
            metrics: metrics, health: health, logger: logger)
    }

    /// Builds the parts with a registry already open (or none).
    public init(
        _ plan: WorkerPlan, apns: APNsParts = .http2, registry: RegistryResolver? = nil, authorizer: CommandAuthorizer? = nil,
        metrics: WorkerMetrics = WorkerMetrics(), health: WorkerHealth = WorkerHealth(), logger: Logger
    ) {
        var sources = ProviderTokenSources()
        apps = plan.apps.map { app in
            var client = app.client
            sources.share(&client)
            return AppParts(
                plan: app, sender: apns.sender(client, logger), admission: DeviceAdmission(maxInFlight: app.maxInFlight, nowReserve: app.nowReserve),
                channels: apns.channels(client))
        }
        tokenSources = sources
        self.plan = plan
        self.registry = registry
        self.authorizer = authorizer
        self.metrics = metrics
        self.health = health
        self.logger = logger
        let shared = plan.settings.shareProviderTokens && !sources.all.isEmpty
        connections = WorkerConnections(
            broker: plan.broker, tokens: shared ? .init(sources: sources.all, exchange: plan.settings.queues.tokensExchange) : nil,
            file: plan.file, health: health, logger: logger)
        health.appsLoaded()
    }

    /// A lane's pipeline over `publisher`: the worker's, once connected, or a recording one.
    public func pipeline(_ lane: Lane, publisher: any MessagePublishing) -> JobPipeline {
        JobPipeline(
            settings: plan.settings, lane: lane, apps: apps.map(\.pipelineApp), publisher: publisher,
            resolver: registry ?? ExplicitTokenResolver(), feedback: registry, badges: registry, metrics: metrics, logger: logger)
    }

    /// What each lane consumes: the now lane `push.jobs`, the bulk lane each app's bulk queue by
    /// its weight, so one app's broadcast neither waits behind another's nor takes all of the worker.
    public var lanes: [Worker.LanePlan] {
        [
            Worker.LanePlan(lane: .now, queues: [(plan.settings.queues.jobs, UInt16(plan.settings.lanes.nowPrefetch))]) { pipeline(.now, publisher: $0) },
            Worker.LanePlan(lane: .bulk, queues: apps.map { ($0.plan.bulkQueue, $0.plan.bulkPrefetch) }) { pipeline(.bulk, publisher: $0) },
        ]
    }

    /// Each app's channel manager, for the registry service's channel requests; they wait for the
    /// fleet's provider tokens, so APNs sees the one token per key.
    public var channelDirectory: ChannelDirectory {
        ChannelDirectory(
            managers: Dictionary(uniqueKeysWithValues: apps.map { ($0.plan.name, (manager: $0.channels, bundleID: $0.plan.bundleID)) }),
            ready: connections.tokensAgreed)
    }

    public func worker() -> Worker {
        let settings = plan.settings
        let started: Logger.Metadata = [
            "queue": "\(settings.queues.jobs)", "prefetch": "\(settings.lanes.nowPrefetch)",
            "bulk_queues": "\(settings.queues.bulkJobs).<app>", "bulk_prefetch": "\(settings.amqp.prefetch) × weight",
            "apps": "\(apps.map(\.plan.name).joined(separator: ","))",
        ]
        return Worker(broker: connections, lanes: lanes, senders: apps.map(\.sender), started: started, logger: logger)
    }

    /// The registry's service, or nil without a registry.
    public func registryService() -> RegistryService? {
        guard let registry else { return nil }
        return RegistryService(
            broker: plan.broker,
            handler: RegistryCommandHandler(
                store: registry.store, authorizer: authorizer, queues: plan.settings.queues, apps: Set(apps.map(\.plan.name)),
                channels: channelDirectory, metrics: metrics, logger: logger),
            health: health, logger: logger)
    }

    /// The services in the order a service group starts them (it stops them in reverse: the
    /// registry's first, then the worker's drain).
    public func services() -> [any Service] {
        sampleGauges()
        return [worker()] + (registryService().map { [$0] } ?? [])
    }

    /// Requests in flight and open connections per app, read at each scrape.
    private func sampleGauges() {
        let gauges = apps.map { app in
            let dimensions = [("app", app.plan.name)]
            return (app.sender, CoreMetrics.Gauge(label: "pushworker_apns_requests_in_flight", dimensions: dimensions),
                CoreMetrics.Gauge(label: "pushworker_apns_connections", dimensions: dimensions))
        }
        metrics.addGaugeSampler {
            for (sender, inFlight, connections) in gauges {
                inFlight.record(sender.requestsInFlight)
                connections.record(sender.openConnections)
            }
        }
    }

    /// Closes what the parts hold, for a caller that built them and runs no service.
    public func shutdown() {
        for app in apps {
            app.sender.shutdown()
            app.channels.shutdown()
        }
    }
}
