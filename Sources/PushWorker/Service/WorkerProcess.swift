import Foundation
import Logging
import Registry
import ServiceLifecycle
import UnixSignals

/// `pushworker run` as a process: the worker in a ServiceGroup that turns the first SIGTERM or
/// SIGINT into a graceful shutdown, plus what ServiceLifecycle leaves to its users: a second
/// signal exits at once, and a shutdown past its grace period stops waiting. Either way nothing
/// is lost: jobs not acknowledged are redelivered to another worker.
public enum WorkerProcess {
    public static func run(_ configuration: PushWorkerConfiguration, file: String, logger: Logger) async throws {
        let registry = try await configuration.openRegistryStore(file: file, logger: logger).map { RegistryResolver(store: $0, logger: logger) }
        let worker = try await Worker.start(configuration, file: file, registry: registry, logger: logger)
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: worker)]
        if let registry {
            services.append(.init(service: try await RegistryService.start(settings: configuration.worker, store: registry.store, file: file, logger: logger)))
        }
        let grace = configuration.worker.shutdownGraceSeconds
        let watcher = Task { await watchSignals(grace: grace, logger: logger) }
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        watcher.cancel()
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
