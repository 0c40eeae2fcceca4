import APNs
import APNsHTTP2
import ArgumentParser
import CommandLineSupport
import FCM
import FCMHTTP2
import Foundation
import PushWorker

/// One notification to one device, for testing credentials and payloads against the real
/// service (or the mock) before a worker ever runs.
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send one notification and print APNs' (or FCM's) answer.",
        discussion: """
            Exits 0 when the service accepts it, 1 otherwise (the answer is printed either way).
            With --platform fcm the token is an Android registration token, sent through the app's fcm \
            side, and the payload holds a job's `notification` and `fcm` objects: \
            {"notification": {"title": "Hi", "body": "There"}, "fcm": {"data": {"k": "v"}}}.
            """)

    @Option(help: "The worker's configuration file (YAML).") var config: String
    @Option(help: "App name from the configuration; optional when it has one app.") var app: String?
    @Option(help: "apns (default) or fcm: the service the token is of.") var platform = "apns"
    @Option(help: "Device token: hex, or as apps log it (`<3F1C 0E5D …>`); with --platform fcm, an Android registration token.") var token: String
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
        guard ["apns", "fcm"].contains(platform) else { throw ValidationError("--platform '\(platform)' is not apns or fcm") }
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
        if platform == "fcm" { return try await sendToFCM(body, app: appPlan) }

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

    /// The payload as a job's `notification` and `fcm`, the job's `priority`, `expiration` and
    /// `collapse_id` as FCM's `android.priority`, `ttl` and `collapse_key`.
    private func sendToFCM(_ body: Data, app: WorkerPlan.App) async throws {
        guard let fcm = app.fcm else { throw CommandFailure("app \(app.name) has no fcm side in the configuration (apps[\(app.index)].fcm)") }
        if let problem = FCMRegistrationToken.problem(token) { throw CommandFailure("--token \(problem)") }
        guard let fields = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else {
            throw CommandFailure("the payload is not a JSON object with notification and/or fcm")
        }
        if let unknown = fields.keys.sorted().first(where: { $0 != "notification" && $0 != "fcm" }) {
            throw CommandFailure("the payload's \(unknown) is not notification or fcm")
        }
        var message: FCMMessage
        do { message = try FCMMessage(notification: fields["notification"], fcm: fields["fcm"]) } catch { throw CommandFailure("the payload's \(error)") }
        if let priority {
            let chosen = try APNsPriority(validating: priority)
            message.priority = message.priority ?? (chosen == .immediate ? .high : .normal)
        }
        if let expiration, message.ttl == nil {
            switch try Self.parseExpiration(expiration) {
            case .immediately: message.ttl = 0
            case .at(let date): message.ttl = max(0, Int(date.timeIntervalSinceNow.rounded(.up)))
            case .after(let duration, let since): message.ttl = max(0, Int(since.addingTimeInterval(Double(duration.components.seconds)).timeIntervalSinceNow.rounded(.up)))
            }
        }
        if message.collapseKey == nil { message.collapseKey = collapseID }
        do { try message.validate() } catch { throw CommandFailure("the payload's \(error)") }
        let tokens = FCMAccessTokenSource(account: fcm.account, caFile: fcm.client.caFile, proxy: fcm.client.proxy)
        try await Self.accessToken(from: tokens)
        let client = FCMClient(configuration: fcm.client, tokens: tokens)
        defer { client.shutdown() }
        switch await client.send(message.encoded(), to: [token])[0] {
        case .accepted(let name):
            print("status: 200\nname: \(name)")
        case .failed(let failure):
            print("reason: \(failure.reason)\ndetail: \(failure.detail)")
            throw ExitCode.failure
        case .unanswered(let why):
            throw CommandFailure("no answer from FCM: \(why)")
        }
    }

    /// Gets the access token before the message is sent, riding out a token endpoint that is
    /// briefly away or slow (a timeout, a 503) as a worker does, but for a few tries only: someone
    /// is waiting at the terminal. A refused grant is the credentials failing and is said at once.
    static func accessToken(from tokens: FCMAccessTokenSource, tries: Int = 3) async throws {
        for attempt in 1...tries {
            do {
                _ = try await tokens.token()
                return
            } catch {
                guard case .unreachable = error, attempt < tries else { throw CommandFailure("no FCM access token: \(error)") }
                let pause = FCMAccessTokenSource.retryAfterUnreachable
                FileHandle.standardError.write(Data("\(error); asking again in \(Int(pause)) s (try \(attempt + 1) of \(tries))\n".utf8))
                // Just past the source's hold, so the next call asks the endpoint again.
                try await Task.sleep(for: .seconds(pause + 0.2))
            }
        }
    }

    static func parseExpiration(_ text: String) throws -> APNsExpiration {
        if text == "immediate" { return .immediately }
        if text.hasPrefix("+"), let seconds = Int(text.dropFirst()) { return .after(.seconds(seconds), since: Date()) }
        if let seconds = Int64(text) { return .at(Date(timeIntervalSince1970: Double(seconds))) }
        if let date = ISO8601DateFormatter().date(from: text) { return .at(date) }
        throw CommandFailure("--expiration '\(text)' is not immediate, Unix seconds, RFC 3339 or +SECONDS")
    }
}
