import Logging
import OperatorEndpoint
import Registry
import ServiceLifecycle

/// `pushworker run` as a process: one ServiceGroup that turns the first SIGTERM or SIGINT into a
/// graceful shutdown and gives it `shutdown_grace_seconds`. Its services, stopped in reverse:
/// the registry's, then the worker's drain, then the operator endpoint, so the probes and
/// `/metrics` answer throughout the drain; `ShutdownEscalation` first, watching over it all.
///
/// The metrics endpoint starts before the group, so `/healthz` answers and `/readyz` says what is
/// missing while the worker waits for its broker.
public enum WorkerProcess {
    public static func run(_ configuration: PushWorkerConfiguration, file: String, logger: Logger) async throws {
        let metrics = WorkerMetrics()
        let health = WorkerHealth(metrics: metrics)
        let endpoint = try await startEndpoint(configuration, file: file, metrics: metrics, health: health, logger: logger)
        let services: [ServiceGroupConfiguration.ServiceConfiguration]
        do {
            services = try await workerServices(configuration, file: file, metrics: metrics, health: health, logger: logger)
        } catch {
            await endpoint?.shutdown()
            throw error
        }
        let grace = configuration.worker.shutdownGraceSeconds
        let escalation = await ShutdownEscalation(grace: grace, logger: logger)
        var group = ServiceGroupConfiguration(
            services: [.init(service: escalation)] + (endpoint.map { [.init(service: $0)] } ?? []) + services,
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        group.maximumGracefulShutdownDuration = .seconds(grace)
        try await ServiceGroup(configuration: group).run()
    }

    private static func workerServices(
        _ configuration: PushWorkerConfiguration, file: String, metrics: WorkerMetrics, health: WorkerHealth, logger: Logger
    ) async throws -> [ServiceGroupConfiguration.ServiceConfiguration] {
        if configuration.worker.registry != nil { health.registryOpening() }
        let registry = try await configuration.openRegistryStore(file: file, logger: logger).map { RegistryResolver(store: $0, logger: logger) }
        let authorizer = try await configuration.registryAuthorizer(file: file)
        if let registry { health.watch(registry: registry.store) }
        let worker = try await Worker.start(configuration, file: file, registry: registry, metrics: metrics, health: health, logger: logger)
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: worker)]
        if let registry {
            services.append(.init(service: try await RegistryService.start(
                settings: configuration.worker, apps: Set(configuration.apps.map(\.name)), store: registry.store, authorizer: authorizer,
                channels: try ChannelDirectory(configuration, file: file, tokenSources: worker.tokenSources), file: file,
                metrics: metrics, health: health, logger: logger)))
        }
        return services
    }

    /// `/metrics`, `/healthz` and `/readyz` on `metrics_address`, with Prometheus as the
    /// process's metrics backend; nil when the address is `null`.
    private static func startEndpoint(
        _ configuration: PushWorkerConfiguration, file: String, metrics: WorkerMetrics, health: WorkerHealth, logger: Logger
    ) async throws -> OperatorEndpoint? {
        guard let (host, port, key) = try configuration.worker.metricsEndpoint(file: file) else { return nil }
        let registry = PrometheusExport.bootstrap()
        let endpoint: OperatorEndpoint
        do {
            endpoint = try await OperatorEndpoint.start(
                host: host, port: port, registry: registry, beforeScrape: { metrics.sampleGauges() }, readiness: { await health.report() })
        } catch {
            throw ConfigurationError(
                file: file, key: key,
                "cannot listen on \(host):\(port): \(error). Another process (another worker on this host?) may hold the port: give each worker its own with PUSHWORKER_METRICS_ADDRESS, or null for none")
        }
        logger.info("serving /metrics, /healthz and /readyz", metadata: ["address": "\(host):\(endpoint.port)"])
        return endpoint
    }
}
