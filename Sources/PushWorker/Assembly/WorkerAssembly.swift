import APNs
import FCMHTTP2
import CoreMetrics
import Logging
import Stores
import RegistryAuth
import ServiceLifecycle

/// The composition root: the one place a worker is put together. It turns the checked plan
/// into the parts — per app one sender, one admission and one channel manager, and one
/// provider-token source per key whoever uses it (pushes, channel management, the fleet's
/// agreement) — and the services that take them ready and connect in `run()`: the ledger's
/// writer, the worker and, with a registry, the registry service. A new service is added here
/// and nowhere else.
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
    /// Writes every device's final result to the ledger; nil with `ledger: off` or no store for it.
    public let ledger: LedgerWriter?
    /// What the stores run while open (a PostgreSQL pool): a process's group starts them before
    /// `services` and the operator endpoint, and stops them after (`WorkerProcess`).
    public var storeServices: [any Service] = []
    /// Releases the jobs held until their `send_at`; nil without a ledger (the schedule lives in its store).
    public let releaser: ScheduleReleaser?
    public let connections: WorkerConnections
    public let worker: Worker
    public let registryService: RegistryService?
    public let metrics: WorkerMetrics
    public let health: WorkerHealth
    public let logger: Logger

    /// Builds the parts from the plan, the registry it names (opened, its schema migrated) and
    /// the ledger it keeps.
    public static func build(
        _ plan: WorkerPlan, apns: APNsParts = .http2, metrics: WorkerMetrics = WorkerMetrics(), health: WorkerHealth = WorkerHealth(), logger: Logger
    ) async throws -> WorkerAssembly {
        if plan.settings.registry != nil { health.registryOpening() }
        let registry = try await plan.configuration.openRegistry(file: plan.file, forWorker: true, logger: logger)
        let authorizer = try await plan.configuration.registryAuthorizer(file: plan.file)
        if let store = registry?.store { health.watch(registry: store) }
        let stores = try await plan.openStores(in: registry, rebuildingIndexes: true, logger: logger)
        var assembly = WorkerAssembly(
            plan, apns: apns, registry: stores.registry.map { RegistryResolver(store: $0, logger: logger) }, authorizer: authorizer,
            ledger: stores.ledger, schedule: stores.schedule, metrics: metrics, health: health, logger: logger)
        assembly.storeServices = stores.services
        return assembly
    }

    /// Builds the parts with a registry and a ledger already open (or none).
    public init(
        _ plan: WorkerPlan, apns: APNsParts = .http2, registry: RegistryResolver? = nil, authorizer: CommandAuthorizer? = nil,
        ledger: (any LedgerStore)? = nil, schedule: (any ScheduleStore)? = nil, clock: WallClock = .system, metrics: WorkerMetrics = WorkerMetrics(),
        health: WorkerHealth = WorkerHealth(), logger: Logger
    ) {
        var sources = ProviderTokenSources()
        // One access token source per service account, whichever apps send with it: the fleet
        // shares its token, and two sources here would each ask Google for their own.
        var fcmSources: [String: FCMAccessTokenSource] = [:]
        let apps = plan.apps.map { app in
            var client = app.client
            sources.share(&client)
            return AppParts(
                plan: app, sender: apns.sender(client, logger), admission: DeviceAdmission(maxInFlight: app.maxInFlight, nowReserve: app.nowReserve),
                channels: apns.channels(client),
                fcm: app.fcm.map { fcm in
                    // Apps that reach Google the same way share one; another proxy or CA is a source of its own.
                    let account = [fcm.account.clientEmail, fcm.account.tokenURI, fcm.client.caFile ?? "", fcm.client.proxy ?? ""].joined(separator: "\u{0}")
                    let tokens = fcmSources[account] ?? FCMAccessTokenSource(account: fcm.account, caFile: fcm.client.caFile, proxy: fcm.client.proxy, logger: logger)
                    fcmSources[account] = tokens
                    return FCMClient(configuration: fcm.client, tokens: tokens, logger: logger)
                })
        }
        self.apps = apps
        tokenSources = sources
        self.plan = plan
        self.registry = registry
        self.authorizer = authorizer
        self.metrics = metrics
        self.health = health
        self.logger = logger
        let writer = ledger.map {
            LedgerWriter(ledger: $0, retentionDays: plan.settings.ledger.retentionDays, idempotencyHours: plan.settings.ledger.idempotencyHours, logger: logger)
        }
        self.ledger = writer
        let shared = plan.settings.shareProviderTokens && !(sources.all.isEmpty && fcmSources.isEmpty)
        let connections = WorkerConnections(
            broker: plan.broker,
            tokens: shared ? .init(sources: sources.all, fcm: Array(fcmSources.values), exchange: plan.settings.queues.tokensExchange) : nil,
            file: plan.file, health: health, logger: logger)
        self.connections = connections
        let settings = plan.settings
        let scheduler = schedule.map { JobScheduler(store: $0, clock: clock, horizonDays: settings.ledger.scheduleHorizonDays) }
        releaser = scheduler.map {
            ScheduleReleaser(
                scheduler: $0, broker: plan.broker, retentionDays: settings.ledger.retentionDays, after: connections.connected, health: health,
                metrics: metrics, logger: logger)
        }
        let resolver: any AudienceResolver = registry ?? ExplicitTokenResolver()
        let stages = JobStages.assemble(
            apps: apps.map(\.pipelineApp), ledger: writer, scheduler: scheduler, registry: registry?.store, resolver: resolver,
            chunkSize: settings.chunkSize, clock: clock, logger: logger)
        let nowBodies = JobBodyBudget(limit: settings.lanes.nowLargeJobBytes)
        let pipeline: @Sendable (Lane, any MessagePublishing) -> JobPipeline = { lane, publisher in
            JobPipeline(
                settings: settings, lane: lane, apps: apps.map(\.pipelineApp), publisher: publisher, resolver: resolver,
                feedback: registry, badges: registry, ledger: writer, scheduler: scheduler, stages: stages,
                bodyBudget: lane == .now ? nowBodies : nil, metrics: metrics, logger: logger)
        }
        self.pipelineMaker = pipeline
        // What each lane consumes: the now lane `push.jobs` and the schedule's releases
        // (`push.jobs.due`, with a prefetch of its own, so a release never waits behind jobs still
        // to be held), the bulk lane each app's bulk queue by its weight, so one app's
        // broadcast neither waits behind another's nor takes all of the worker.
        let lanes = [
            Worker.LanePlan(
                lane: .now, queues: [(settings.queues.jobs, UInt16(settings.lanes.nowPrefetch)), (settings.queues.dueJobs, UInt16(settings.lanes.duePrefetch))],
                pipeline: { pipeline(.now, $0) }, bodyBudget: nowBodies),
            Worker.LanePlan(lane: .bulk, queues: apps.map { ($0.plan.bulkQueue, $0.plan.bulkPrefetch) }) { pipeline(.bulk, $0) },
        ]
        self.lanes = lanes
        let started: Logger.Metadata = [
            "queue": "\(settings.queues.jobs)", "due_queue": "\(settings.queues.dueJobs)", "prefetch": "\(settings.lanes.nowPrefetch)", "due_prefetch": "\(settings.lanes.duePrefetch)",
            "bulk_queues": "\(settings.queues.bulkJobs).<app>", "bulk_prefetch": "\(settings.amqp.prefetch) × weight",
            "apps": "\(apps.map(\.plan.name).joined(separator: ","))", "ledger": "\(writer == nil ? "off" : "on")",
        ]
        worker = Worker(broker: connections, lanes: lanes, senders: apps.map(\.sender), started: started, logger: logger)
        let channels = ChannelDirectory(managers: Dictionary(uniqueKeysWithValues: apps.map { ($0.plan.name, (manager: $0.channels, bundleID: $0.plan.bundleID)) }))
        self.channelDirectory = channels
        registryService = registry.map { registry in
            RegistryService(
                broker: plan.broker,
                handler: RegistryCommandHandler(
                    store: registry.store, authorizer: authorizer, queues: settings.queues, apps: Set(apps.map(\.plan.name)),
                    channels: channels, ledger: ledger, schedule: scheduler, metrics: metrics, logger: logger),
                after: connections.connected, health: health, logger: logger)
        }
        Self.sampleGauges(of: apps, into: metrics)
        health.watch(fcm: Array(fcmSources.values))
        health.appsLoaded()
    }

    private let pipelineMaker: @Sendable (Lane, any MessagePublishing) -> JobPipeline
    /// What each lane consumes, and its pipeline.
    public let lanes: [Worker.LanePlan]
    /// Each app's channel manager, for the registry service's channel requests.
    public let channelDirectory: ChannelDirectory

    /// A lane's pipeline over `publisher`: the worker's, once connected, or a recording one.
    public func pipeline(_ lane: Lane, publisher: any MessagePublishing) -> JobPipeline {
        pipelineMaker(lane, publisher)
    }

    /// The services in the order a service group starts them; it stops them in reverse: the
    /// registry's first, then the schedule's releaser, then the worker's drain, then the ledger's writer, which writes what the
    /// drain left. (The stores' own, `storeServices`, go before these and the endpoint.) A service that fails shuts the others down gracefully: a worker sending a job
    /// finishes it rather than be cancelled half-way (and send it again when it comes back).
    public var services: [ServiceGroupConfiguration.ServiceConfiguration] {
        let services: [any Service] = (ledger.map { [$0] } ?? []) + [worker] + (releaser.map { [$0] } ?? []) + (registryService.map { [$0] } ?? [])
        return services.map { .init(service: $0, failureTerminationBehavior: .gracefullyShutdownGroup) }
    }

    /// Requests in flight and open connections per app and service, read at each scrape.
    private static func sampleGauges(of apps: [AppParts], into metrics: WorkerMetrics) {
        let gauges = apps.map { app in
            let dimensions = [("app", app.plan.name)]
            return (app.sender, CoreMetrics.Gauge(label: "pushworker_apns_requests_in_flight", dimensions: dimensions),
                CoreMetrics.Gauge(label: "pushworker_apns_connections", dimensions: dimensions))
        }
        let fcm = apps.compactMap { app in
            app.fcm.map { client in
                let dimensions = [("app", app.plan.name)]
                return (client, CoreMetrics.Gauge(label: "pushworker_fcm_requests_in_flight", dimensions: dimensions),
                    CoreMetrics.Gauge(label: "pushworker_fcm_connections", dimensions: dimensions))
            }
        }
        metrics.addGaugeSampler {
            for (sender, inFlight, connections) in gauges {
                inFlight.record(sender.requestsInFlight)
                connections.record(sender.openConnections)
            }
            for (client, inFlight, connections) in fcm {
                inFlight.record(client.requestsInFlight)
                connections.record(client.openConnections)
            }
        }
    }

    /// Closes what the parts hold, for a caller that built them and runs no service.
    public func shutdown() {
        for app in apps {
            app.sender.shutdown()
            app.channels.shutdown()
            app.fcm?.shutdown()
        }
    }
}
