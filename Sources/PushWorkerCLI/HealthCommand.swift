import ArgumentParser
import CommandLineSupport
import Foundation
import OperatorEndpoint
import PushWorker

/// Asks a worker's own endpoint whether it is ready (or, with `--live`, alive): the image's
/// HEALTHCHECK and the compose workers run it, so the image needs neither curl nor a shell.
struct HealthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "health",
        abstract: "Ask a worker's endpoint whether it is ready; exit 0 if so, 1 if not.",
        discussion: """
            Asks GET /readyz (or /healthz with --live) on the worker's endpoint: the address in --url, \
            else PUSHWORKER_METRICS_ADDRESS, else metrics_address in --config (the default \
            127.0.0.1:9090 when the file sets none; 0.0.0.0 and :: are asked on the loopback address).
            Exit codes: 0 ready (or alive); 1 not ready, not alive, no answer within --timeout, or no \
            endpoint configured; 64 a bad option. Docker's HEALTHCHECK reads 0 as healthy and 1 as \
            unhealthy.
            """)

    @Option(help: "The worker's configuration file; its metrics_address is asked.") var config = "/etc/pushworker/pushworker.yaml"
    @Option(help: "The endpoint to ask instead, http://HOST:PORT (a path there replaces /readyz).") var url: String?
    @Flag(help: "Ask /healthz (the process serves) instead of /readyz (connected and able to send).") var live = false
    @Option(help: "Seconds to wait for the answer.") var timeout: Double = 5

    func validate() throws {
        guard timeout > 0, timeout <= 300 else { throw ValidationError("--timeout: \(timeout) is not between 0 and 300 seconds") }
    }

    func run() async throws {
        let target = try endpoint()
        let answer: EndpointProbe.Answer
        do {
            answer = try await EndpointProbe.get(host: target.host, port: target.port, path: target.path, timeoutSeconds: timeout)
        } catch {
            throw CommandFailure("\(target.description): \(error)")
        }
        guard answer.status == 200 else {
            let report = answer.body.split(separator: "\n").prefix(8).joined(separator: "; ")
            throw CommandFailure("\(target.description) answered \(answer.status)\(report.isEmpty ? "" : ": \(report)")")
        }
        print("\(target.description) answered 200")
    }

    private struct Target: CustomStringConvertible {
        var host: String
        var port: Int
        var path: String
        var description: String { "http://\(host.contains(":") ? "[\(host)]" : host):\(port)\(path)" }
    }

    private func endpoint() throws -> Target {
        let path = live ? "/healthz" : "/readyz"
        if let url {
            guard let parsed = URLComponents(string: url), parsed.scheme == "http", var host = parsed.host, !host.isEmpty else {
                throw ValidationError("--url: '\(url)' is not http://HOST:PORT")
            }
            // An IPv6 address may come back in its brackets.
            if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            return Target(host: loopback(host), port: parsed.port ?? 80, path: parsed.path.isEmpty || parsed.path == "/" ? path : parsed.path)
        }
        let configured: (host: String, port: Int, key: String)?
        do {
            // PUSHWORKER_METRICS_ADDRESS wins over the file, as for `run`, and then the file is not
            // needed: a container whose configuration lies elsewhere is asked all the same.
            let settings = ProcessInfo.processInfo.environment["PUSHWORKER_METRICS_ADDRESS"] != nil
                ? WorkerSettings() : try PushWorkerConfiguration.load(file: config).worker
            configured = try settings.metricsEndpoint(file: config)
        } catch {
            throw CommandFailure("\(error)")
        }
        guard let configured else {
            throw CommandFailure("\(config): metrics_address is null: the worker serves no endpoint to ask (give --url, or set metrics_address)")
        }
        return Target(host: loopback(configured.host), port: configured.port, path: path)
    }

    /// A worker listening on every address is asked on the loopback one.
    private func loopback(_ host: String) -> String {
        switch host {
        case "0.0.0.0", "": "127.0.0.1"
        case "::", "[::]": "::1"
        default: host
        }
    }
}
