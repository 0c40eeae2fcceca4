import Foundation
import Logging
import OperatorEndpoint
import Registry
import ServiceLifecycle
import UnixSignals

/// `pushworker run` as a process: the worker in a ServiceGroup that turns the first SIGTERM or
/// SIGINT into a graceful shutdown, plus what ServiceLifecycle leaves to its users: a second
/// signal exits at once, and a shutdown past its grace period stops waiting. Either way nothing
/// is lost: jobs not acknowledged are redelivered to another worker.
///
/// The metrics endpoint starts first, so `/healthz` answers and `/readyz` says what is missing
/// while the worker waits for its broker.
public enum WorkerProcess {
    public static func run(_ configuration: PushWorkerConfiguration, file: String, logger: Logger) async throws {
        let metrics = WorkerMetrics()
        let health = WorkerHealth(metrics: metrics)
        let endpoint = try await startEndpoint(configuration, file: file, metrics: metrics, health: health, logger: logger)
        do {
            try await serve(configuration, file: file, metrics: metrics, health: health, logger: logger)
        } catch {
            await endpoint?.shutdown()
            throw error
        }
        await endpoint?.shutdown()
    }

    private static func serve(
        _ configuration: PushWorkerConfiguration, file: String, metrics: WorkerMetrics, health: WorkerHealth, logger: Logger
    ) async throws {
        if configuration.worker.registry != nil { health.registryOpening() }
        let registry = try await configuration.openRegistryStore(file: file, logger: logger).map { RegistryResolver(store: $0, logger: logger) }
        let authorizer = try await configuration.registryAuthorizer(file: file)
        if let registry { health.watch(registry: registry.store) }
        let worker = try await Worker.start(configuration, file: file, registry: registry, metrics: metrics, health: health, logger: logger)
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: worker)]
        if let registry {
            services.append(.init(service: try await RegistryService.start(
                settings: configuration.worker, apps: Set(configuration.apps.map(\.name)), store: registry.store, authorizer: authorizer, file: file,
                metrics: metrics, health: health, logger: logger)))
        }
        let grace = configuration.worker.shutdownGraceSeconds
        let watcher = Task { await watchSignals(grace: grace, logger: logger) }
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        watcher.cancel()
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

    private static func watchSignals(grace: Int, logger: Logger) async {
        var received = 0
        for await _ in await UnixSignalsSequence(trapping: .sigterm, .sigint) {
            received += 1
            guard received == 1 else {
                logger.warning("second signal: exiting now; unacknowledged jobs will be redelivered")
                exit(130)
            }
            logger.notice("signal received: finishing the jobs in hand, then exiting (signal again to exit now)")
            Task.detached {
                try await Task.sleep(for: .seconds(grace))
                logger.error("shutdown grace period of \(grace) s exceeded; exiting")
                exit(1)
            }
        }
    }
}
