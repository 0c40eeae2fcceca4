import ArgumentParser
import Dispatch
import Foundation
import Logging
import PushWorker
import ServiceLifecycle

/// The worker: consume push jobs until SIGTERM or SIGINT, then finish what is in hand and exit 0.
/// A second signal exits at once; nothing is lost, as unacknowledged jobs are redelivered.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a worker: consume jobs, send them to APNs, publish the results.",
        discussion: """
            The broker URL comes from amqp.url in the configuration, or from the environment \
            variable PUSHWORKER_AMQP_URL, which wins (it keeps the password out of files). \
            Logs go to standard error.

            SIGTERM or SIGINT: stop taking jobs, finish the jobs in hand (at most \
            shutdown_grace_seconds), acknowledge them and exit 0. A second signal exits at once \
            with status 130; jobs not yet acknowledged are redelivered to another worker, so \
            nothing is lost.
            """)

    @Option(help: "The worker's configuration file (YAML).") var config: String
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.") var logLevel = "info"
    @Option(name: .customLong("log-format"), help: "text, or json (one object per line) for log shippers.") var logFormat = "text"

    func validate() throws {
        guard ["text", "json"].contains(logFormat) else { throw ValidationError("--log-format '\(logFormat)' is not text or json") }
    }

    func run() async throws {
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("--log-level '\(logLevel)' is not one of trace, debug, info, notice, warning, error, critical")
        }
        let json = logFormat == "json"
        LoggingSystem.bootstrap { label in
            if json { return JSONLogHandler(label: label, level: level) }
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "pushworker")
        let configuration = try PushWorkerConfiguration.load(file: config)
        let worker = try await Worker.start(configuration, file: config, logger: logger)
        let grace = configuration.worker.shutdownGraceSeconds
        // ServiceLifecycle turns the first SIGTERM or SIGINT into a graceful shutdown; this
        // handler only watches for a second one.
        let signals = SignalHandling(logger: logger) {
            // Past the grace period, stop waiting: the broker redelivers what was not acknowledged.
            DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(grace)) {
                logger.error("shutdown grace period of \(grace) s exceeded; exiting")
                Foundation.exit(1)
            }
        }
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: [.init(service: worker)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        signals.cancel()
    }
}

/// SIGTERM and SIGINT: the first calls `onFirst`, the second exits at once.
final class SignalHandling: @unchecked Sendable {
    private let sources: [DispatchSourceSignal]
    private let count = Locked(0)

    init(logger: Logger, onFirst: @escaping @Sendable () -> Void) {
        var sources: [DispatchSourceSignal] = []
        for number in [SIGTERM, SIGINT] {
            // Dispatch sources see a signal only while its default action (terminate) is off.
            signal(number, SIG_IGN)
            sources.append(DispatchSource.makeSignalSource(signal: number, queue: .global()))
        }
        self.sources = sources
        for source in sources {
            let count = self.count
            source.setEventHandler {
                if count.withLock({ $0 += 1; return $0 }) == 1 {
                    logger.notice("signal received: finishing the jobs in hand, then exiting (signal again to exit now)")
                    onFirst()
                } else {
                    logger.warning("second signal: exiting now; unacknowledged jobs will be redelivered")
                    exit(130)
                }
            }
            source.resume()
        }
    }

    func cancel() {
        for source in sources { source.cancel() }
    }
}
