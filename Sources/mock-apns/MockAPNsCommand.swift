import APNs
import ArgumentParser
import FCM
import Foundation
import MockAPNs

/// `swift run mock-apns --port 2197 --cert server.pem --key server.key --provider-key KEYID:TEAMID:key.pub.pem`
@main
struct MockAPNsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mock-apns",
        abstract: "A local APNs stand-in over HTTP/2 and TLS, for tests, demos and load tests.")

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port (0 for a free one; the chosen port is printed).") var port = 2197
    @Option(help: "PEM server certificate.") var cert: String
    @Option(help: "PEM server key.") var key: String
    @Option(name: .customLong("client-ca"), help: "PEM CA for certificate-auth clients.") var clientCA: String?
    @Option(name: .customLong("provider-key"), help: "KEYID:TEAMID:PUBLIC_KEY_PEM_FILE accepted for token auth; repeatable.")
    var providerKeys: [String] = []
    @Option(name: .customLong("topic"), help: "Topic to accept; repeatable; none accepts any.") var topics: [String] = []
    @Option(name: .customLong("max-streams"), help: "MAX_CONCURRENT_STREAMS after the first accepted request.") var maxStreams = 1000
    @Option(name: .customLong("unregistered"), help: "Token to answer 410 Unregistered, invalid as of each request; repeatable.") var unregistered: [String] = []
    @Option(name: .customLong("report-port"), help: "Port for the plain-HTTP report endpoint (GET /counts, /notifications; 0 for a free one, printed).") var reportPort: Int?
    @Option(help: "Event loop threads.") var threads = 1
    @Option(
        name: .customLong("management-port"),
        help: "Serve the broadcast channel management API (/1/apps/…) on a second TLS port (0 for a free one); without it the main port serves it.")
    var managementPort: Int?
    @Option(
        name: .customLong("channel"),
        help: "BUNDLE=ID[:POLICY]: a broadcast channel that exists from the start (ID base64; POLICY none or most_recent, default most_recent); repeatable.")
    var channels: [String] = []
    @Flag(help: "Behave like production (no apns-unique-id).") var production = false
    @Option(
        name: .customLong("fcm-service-account"),
        help: "A service account key file whose grants FCM's token endpoint (POST /token) takes, and whose project messages:send serves; repeatable.")
    var fcmServiceAccounts: [String] = []
    @Option(name: .customLong("fcm-unregistered"), help: "Android registration token FCM answers UNREGISTERED; repeatable.") var fcmUnregistered: [String] = []

    func run() async throws {
        var configuration = MockAPNsConfiguration(certificateFile: cert, privateKeyFile: key)
        configuration.host = host
        configuration.port = port
        configuration.clientCAFile = clientCA
        configuration.topics = Set(topics)
        configuration.maxConcurrentStreams = maxStreams
        configuration.sandbox = !production
        configuration.reportPort = reportPort
        configuration.threads = threads
        configuration.managementPort = managementPort
        for entry in channels {
            guard let equals = entry.firstIndex(of: "=") else { throw ValidationError("--channel '\(entry)' must be BUNDLE=ID[:POLICY]") }
            let bundle = String(entry[..<equals])
            var id = String(entry[entry.index(after: equals)...])
            var policy = APNsChannelStoragePolicy.mostRecentMessageStored
            // Base64 has no ':', so the last one separates the policy.
            if let colon = id.lastIndex(of: ":") {
                guard let named = APNsChannelStoragePolicy(name: String(id[id.index(after: colon)...])) else {
                    throw ValidationError("--channel '\(entry)': the policy must be none or most_recent")
                }
                policy = named
                id = String(id[..<colon])
            }
            do { try APNsChannel.validate(id: id) } catch { throw ValidationError("--channel '\(entry)': \(error)") }
            guard !bundle.isEmpty else { throw ValidationError("--channel '\(entry)' names no bundle id") }
            configuration.channels[bundle, default: [:]][id] = policy
        }
        // Invalid as of each request: a device registered after the mock started is still reported
        // as having gone away since, as a device uninstalled after its registration would be.
        configuration.unregisteredTokens = Dictionary(uniqueKeysWithValues: unregistered.map { ($0, Date.distantFuture) })
        for entry in providerKeys {
            let parts = entry.split(separator: ":", maxSplits: 2).map(String.init)
            guard parts.count == 3 else { throw ValidationError("--provider-key '\(entry)' must be KEYID:TEAMID:PUBLIC_KEY_PEM_FILE") }
            let pem = try String(contentsOfFile: parts[2], encoding: .utf8)
            configuration.providerKeys[parts[0]] = (parts[1], pem)
        }
        for path in fcmServiceAccounts {
            do {
                configuration.fcmAccounts.append(MockFCMAccount(try FCMServiceAccount(path: path)))
            } catch {
                throw ValidationError("--fcm-service-account \(path): \(error.message)")
            }
        }
        configuration.fcmUnregisteredTokens = Set(fcmUnregistered)
        let server = try await MockAPNsServer.start(configuration)
        // Written unbuffered: scripts wait for this line to learn the port.
        let line = "mock-apns listening on \(server.url)" + (server.reportPort.map { ", report endpoint http://\(host):\($0)/counts" } ?? "")
            + (server.managementPort.map { ", channel management https://\(host):\($0)" } ?? "")
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
        // Serve until interrupted.
        while true { try await Task.sleep(for: .seconds(3600)) }
    }
}
