import ArgumentParser
import Foundation
import Logging
import PushWorker

/// The worker: consume push jobs until SIGTERM or SIGINT, then finish what is in hand and exit 0.
/// A second signal exits at once; nothing is lost, as unacknowledged jobs are redelivered
/// (`WorkerProcess`).
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a worker: consume jobs, send them to APNs, publish the results.",
        discussion: """
            The broker URL comes from amqp.url in the configuration, or from the environment \
            variable PUSHWORKER_AMQP_URL, which wins (it keeps the password out of files). \
            PUSHWORKER_METRICS_ADDRESS likewise overrides metrics_address (HOST:PORT, or null), \
            so that several workers on one host can share a configuration file. \
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
            return TextLogHandler(label: label, level: level)
        }
        let logger = Logger(label: "pushworker")
        try await WorkerProcess.run(try WorkerPlan.load(file: config), logger: logger)
    }
}
