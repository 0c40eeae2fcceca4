import Logging
import OperatorEndpoint
import ServiceLifecycle

/// `pushworker run` as a process: one ServiceGroup that turns the first SIGTERM or SIGINT into a
/// graceful shutdown and gives it `shutdown_grace_seconds`. Its services, stopped in reverse:
/// the registry's, then the worker's drain, then the operator endpoint, so the probes and
/// `/metrics` answer throughout the drain; `ShutdownEscalation` first, watching over it all.
///
/// The metrics endpoint starts before the group, so `/healthz` answers and `/readyz` says what is
/// missing while the worker waits for its broker.
public enum WorkerProcess {
    public static func run(_ plan: WorkerPlan, logger: Logger) async throws {
        let metrics = WorkerMetrics()
        let health = WorkerHealth(metrics: metrics)
        let page = plan.deliveriesPageToken.map { DeliveriesPage(token: $0) }
        let endpoint = try await startEndpoint(plan, metrics: metrics, health: health, page: page, logger: logger)
        let assembly: WorkerAssembly
        do {
            assembly = try await WorkerAssembly.build(plan, metrics: metrics, health: health, logger: logger)
        } catch {
            await endpoint?.shutdown()
            throw error
        }
        if let page, let ledger = assembly.ledger?.ledger {
            page.serve(ledger)
        } else if page != nil {
            logger.warning("/deliveries answers 503: this worker keeps no ledger (no registry and no ledger.sqlite)")
        }
        let grace = plan.settings.shutdownGraceSeconds
        let escalation = await ShutdownEscalation(grace: grace, logger: logger)
        // The stores' services (a PostgreSQL pool) start before, and stop after, everything that
        // reads or writes through them: the endpoint's /readyz and /deliveries answer to the end.
        let first: [any Service] = [escalation] + assembly.storeServices + (endpoint.map { [$0] } ?? [])
        var group = ServiceGroupConfiguration(
            services: first.map { .init(service: $0) } + assembly.services,
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        group.maximumGracefulShutdownDuration = .seconds(grace)
        try await ServiceGroup(configuration: group).run()
    }

    /// `/metrics`, `/healthz` and `/readyz` on `metrics_address`, with Prometheus as the
    /// process's metrics backend; nil when the address is `null`.
    private static func startEndpoint(
        _ plan: WorkerPlan, metrics: WorkerMetrics, health: WorkerHealth, page: DeliveriesPage?, logger: Logger
    ) async throws -> OperatorEndpoint? {
        guard let address = plan.endpoint else { return nil }
        let registry = PrometheusExport.bootstrap()
        let endpoint: OperatorEndpoint
        do {
            endpoint = try await OperatorEndpoint.start(
                host: address.host, port: address.port, registry: registry, beforeScrape: { metrics.sampleGauges() }, readiness: { await health.report() },
                pages: page.map { page in ["/deliveries": { await page.answer($0) }] } ?? [:])
        } catch {
            throw ConfigurationError(
                file: plan.file, key: address.key,
                "cannot listen on \(address.host):\(address.port): \(error). Another process (another worker on this host?) may hold the port: give each worker its own with PUSHWORKER_METRICS_ADDRESS, or null for none")
        }
        logger.info("serving /metrics, /healthz and /readyz", metadata: ["address": "\(address.host):\(endpoint.port)", "deliveries_page": "\(page == nil ? "off" : "on")"])
        return endpoint
    }
}
