import APNs
import APNsHTTP2
import ArgumentParser
import CommandLineSupport
import Foundation
import PushWorker

/// One notification to one device, for testing credentials and payloads against the real
/// service (or the mock) before a worker ever runs.
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send one notification and print APNs' answer.",
        discussion: "Exits 0 when APNs answers 200, 1 otherwise (the answer is printed either way).")

    @Option(help: "The worker's configuration file (YAML).") var config: String
    @Option(help: "App name from the configuration; optional when it has one app.") var app: String?
    @Option(help: "Device token: hex, or as apps log it (`<3F1C 0E5D …>`).") var token: String
    @Option(help: "The APNs payload as JSON text.") var payload: String?
    @Option(help: "Read the payload from this file.") var file: String?
    @Option(name: .customLong("push-type"), help: "alert, background, voip, …") var pushType = "alert"
    @Option(help: "10, 5 or 1; default 10 (5 for background).") var priority: Int?
    @Option(help: "immediate, Unix seconds, RFC 3339, or +SECONDS from now.") var expiration: String?
    @Option(name: .customLong("collapse-id"), help: "apns-collapse-id: notifications with the same id replace each other (at most 64 bytes).") var collapseID: String?
    @Option(help: "Overrides the app's topic.") var topic: String?
    @Option(name: .customLong("apns-id"), help: "A UUID to send as apns-id.") var apnsID: String?

    func validate() throws {
        guard (payload == nil) != (file == nil) else { throw ValidationError("give the payload with --payload or --file, not both or neither") }
    }

    func run() async throws {
        let appPlan = try WorkerPlan.load(file: config).chosenApp(app)

        let body: Data
        if let file {
            do { body = try Data(contentsOf: URL(fileURLWithPath: file)) } catch {
                throw CommandFailure("cannot read \(file): \(error.localizedDescription)")
            }
        } else {
            body = Data((payload ?? "").utf8)
        }
        do { try JSONSyntaxError.check(body) } catch { throw CommandFailure("the payload is \(error)") }

        var request = APNsRequest(
            deviceToken: APNsDeviceToken.normalized(token), topic: topic ?? appPlan.topic, pushType: try APNsPushType(validating: pushType),
            payload: Array(body))
        if let priority { request.priority = try APNsPriority(validating: priority) }
        if let expiration { request.expiration = try Self.parseExpiration(expiration) }
        request.collapseID = collapseID
        if let apnsID {
            guard let uuid = UUID(uuidString: apnsID) else { throw CommandFailure("--apns-id '\(apnsID)' is not a UUID") }
            request.apnsID = uuid
        }

        let client = APNsClient(configuration: appPlan.client)
        defer { client.shutdown() }
        let response = try await client.send(request)
        var lines = ["status: \(response.status)"]
        if let id = response.apnsID { lines.append("apns-id: \(id)") }
        if let id = response.apnsUniqueID { lines.append("apns-unique-id: \(id)") }
        if let reason = response.reason { lines.append("reason: \(reason)") }
        if let timestamp = response.timestamp { lines.append("timestamp: \(ISO8601DateFormatter().string(from: timestamp))") }
        print(lines.joined(separator: "\n"))
        if response.status != 200 { throw ExitCode.failure }
    }

    static func parseExpiration(_ text: String) throws -> APNsExpiration {
        if text == "immediate" { return .immediately }
        if text.hasPrefix("+"), let seconds = Int(text.dropFirst()) { return .after(.seconds(seconds), since: Date()) }
        if let seconds = Int64(text) { return .at(Date(timeIntervalSince1970: Double(seconds))) }
        if let date = ISO8601DateFormatter().date(from: text) { return .at(date) }
        throw CommandFailure("--expiration '\(text)' is not immediate, Unix seconds, RFC 3339 or +SECONDS")
    }
}
