import APNs
import APNsHTTP2
import ArgumentParser
import Foundation

/// Throughput, latency and memory of the APNs client against an HTTP/2 server (the mock, or any
/// server that answers like APNs). Compare with h2load against the same server and payload.
struct APNsBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns",
        abstract: "Send N notifications and print notifications per second, latency p50/p99 and peak memory.")

    @Option(help: "Server base URL, e.g. https://127.0.0.1:2197") var url: String
    @Option(name: .customLong("ca-file"), help: "PEM CA to trust for the server.") var caFile: String?
    @Option(help: "Notifications to send.") var count = 100_000
    @Option(help: "HTTP/2 connections.") var connections = 1
    @Option(help: "Concurrent streams per connection.") var streams = 1000
    @Option(help: "HTTP/2 transport: nghttp2 or curl.") var transport: APNsTransport = .nghttp2
    @Option(name: .customLong("key-file"), help: "Provider token key (.p8).") var keyFile: String
    @Option(name: .customLong("key-id"), help: "The key's id (10 characters), as the server knows it.") var keyID: String
    @Option(name: .customLong("team-id"), help: "The team id (10 characters) the provider tokens name.") var teamID: String
    @Option(help: "Topic.") var topic = "com.example.app"
    @Option(help: "Device token (hex) to send to.") var token = String(repeating: "0a", count: 32)
    @Option(name: .customLong("payload-file"), help: "JSON payload file; default a small alert.") var payloadFile: String?
    @Option(help: "Notifications per batch send (1: one send per notification, a task each), as a job's fan-out hands them to the client.")
    var batch = 100

    func run() async throws {
        let key = try ES256Key.privateKey(pem: try String(contentsOfFile: keyFile, encoding: .utf8))
        var configuration = APNsClientConfiguration(
            baseURL: url, authentication: .token(ProviderTokenSource(keyID: keyID, teamID: teamID, key: key)))
        configuration.caFile = caFile
        configuration.connections = connections
        configuration.transport = transport
        configuration.maxConcurrentStreams = streams
        let client = APNsClient(configuration: configuration)
        let payload = try payloadFile.map { Array(try Data(contentsOf: URL(fileURLWithPath: $0))) }
            ?? Array(#"{"aps":{"alert":{"title":"Benchmark","body":"Hello from pushworker"},"sound":"default"}}"#.utf8)
        let request = APNsRequest(deviceToken: token, topic: topic, payload: payload)

        // Warm the connections (APNs allows one stream until a request is accepted).
        _ = try await client.send(request)
        // A single send is a batch of one, so batch 1 measures it too; errors count as failures either way.
        let measure = await ClientLoad(count: count, inFlight: connections * streams, batch: batch).run { size in
            await client.send(Array(repeating: request, count: size)).count { (try? $0.get().status) != 200 }
        }
        client.shutdown()
        print(String(format: "pushworker-bench apns: %d notifications in %.2f s = %.0f notifications/s (%d connection(s), %d streams, %d not 200)",
            count, measure.seconds, Double(count) / measure.seconds, connections, streams, measure.failures) + ", \(transport) transport, batches of \(measure.batchSize)")
        print(String(format: "client CPU (user + system) %.2f s = %.1f µs per notification", measure.cpu, measure.cpu / Double(count) * 1e6))
        print(ClientLoad.latencyLine(measure.histogram))
    }
}
