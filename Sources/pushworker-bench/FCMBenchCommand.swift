import APNs
import APNsHTTP2
import ArgumentParser
import FCM
import FCMHTTP2
import Foundation

/// Throughput and CPU of the FCM client against an HTTP/2 server that answers like FCM (the
/// benchmarks' Go server, or the mock): the same measure as `apns`, so the two clients' CPU per
/// message compare on one server in one run.
struct FCMBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fcm",
        abstract: "Send N FCM messages (one per device) and print messages per second, CPU per message, latency and peak memory.")

    @Option(help: "FCM base URL, e.g. https://127.0.0.1:8443") var url: String
    @Option(name: .customLong("ca-file"), help: "PEM CA to trust for the server and the token endpoint.") var caFile: String?
    @Option(name: .customLong("service-account"), help: "Service account key file (its token_uri is asked for the access token).") var serviceAccount: String
    @Option(help: "Messages to send.") var count = 100_000
    @Option(help: "HTTP/2 connections.") var connections = 4
    @Option(help: "Concurrent streams per connection.") var streams = 100
    @Option(help: "HTTP/2 transport: nghttp2 or curl.") var transport: APNsTransport = .nghttp2
    @Option(help: "Messages per send, as a job's fan-out hands them to the client.") var batch = 100

    func run() async throws {
        let account = try FCMServiceAccount(path: serviceAccount)
        var configuration = FCMClient.Configuration()
        configuration.baseURL = url
        configuration.caFile = caFile
        configuration.connections = connections
        configuration.maxConcurrentStreams = streams
        configuration.transport = transport
        let client = FCMClient(configuration: configuration, tokens: FCMAccessTokenSource(account: account, caFile: caFile))
        let message = FCMMessage(
            notification: .init(title: "Benchmark", body: "Hello from pushworker"), data: ["kind": "bench"], priority: .high, ttl: 3600).encoded()
        // Distinct tokens of a registration token's usual length, each its own body.
        let devices = (0..<max(1, min(batch, count))).map { "bench\(String(format: "%06d", $0))abcdefghijk:APA91bH" + String(repeating: "k7-_Qw", count: 20) }

        // Warm the connections and take the access token.
        _ = await client.send(message, to: [devices[0]])
        let measure = await ClientLoad(count: count, inFlight: connections * streams, batch: batch).run { size in
            await client.send(message, to: Array(devices.prefix(size))).count { if case .accepted = $0 { false } else { true } }
        }
        client.shutdown()
        print(String(format: "pushworker-bench fcm: %d messages in %.2f s = %.0f messages/s (%d connection(s), %d streams, %d not accepted)",
            count, measure.seconds, Double(count) / measure.seconds, connections, streams, measure.failures) + ", \(transport) transport, batches of \(measure.batchSize)")
        print(String(format: "client CPU (user + system) %.2f s = %.1f µs per message", measure.cpu, measure.cpu / Double(count) * 1e6))
        print(ClientLoad.latencyLine(measure.histogram))
    }
}
