import ArgumentParser
import CommandLineSupport
import Foundation
import Logging
import PushWorker
import Stores

/// What the ledger holds for a job, a user, a device or an idempotency key: "did user X get
/// notification Y on Tuesday, and what did APNs say?", answered from the store the workers write,
/// newest first, a page at a time.
struct DeliveriesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deliveries",
        abstract: "Show the delivery ledger's records for a job, a user, a device token or an idempotency key, newest first.",
        discussion: """
            Reads the ledger the configuration keeps (ledger: in the registry's store, or ledger.sqlite). \
            One line per device: when its result was final, the job, the token, its platform (apns or fcm), \
            the user, the outcome, the service's status and reason, and the attempts; when more records follow, a last line on stderr \
            gives the --after that continues. --json prints {"deliveries": [...], "next": CURSOR or null}.
            """)

    @Option(help: "The worker's configuration file (YAML).") var config: String
    @Option(help: "A job's id.") var job: String?
    @Option(help: "A user id.") var user: String?
    @Option(help: "A device token (APNs hex, or an Android device's FCM registration token).") var token: String?
    @Option(help: "A job's idempotency_key: the job that holds it (keys are kept for ledger.idempotency_hours).") var key: String?
    @Option(help: "Only this app's records (a key is per app: the same key in two apps names two jobs).") var app: String?
    @Option(help: "Only records from this time on: RFC 3339 or Unix seconds.") var since: String?
    @Option(help: "Only records up to this time: RFC 3339 or Unix seconds.") var until: String?
    @Option(help: "At most this many records (1–10000).") var limit = 100
    @Option(help: "Go on after the last record of a page before: the cursor it printed (next).") var after: String?
    @Flag(help: "Print {\"deliveries\": [...], \"next\": CURSOR or null}.") var json = false

    func validate() throws {
        guard [job, user, token, key].compactMap({ $0 }).count == 1 else { throw ValidationError("name exactly one of --job, --user, --token and --key") }
        guard (1...DeliveryQuery.maximumLimit).contains(limit) else { throw ValidationError("--limit \(limit) is not between 1 and \(DeliveryQuery.maximumLimit)") }
        _ = try Self.time(since, option: "--since")
        _ = try Self.time(until, option: "--until")
        _ = try Self.cursor(after)
    }

    /// Milliseconds since 1970.
    static func time(_ text: String?, option: String) throws -> Int64? {
        guard let text else { return nil }
        guard let milliseconds = RFC3339.milliseconds(commandLine: text) else {
            throw ValidationError("\(option) '\(text)' is not RFC 3339 (2026-11-24T09:00:00Z) or Unix seconds")
        }
        return milliseconds
    }

    static func cursor(_ text: String?) throws -> DeliveryCursor? {
        guard let text else { return nil }
        guard let cursor = DeliveryCursor(text) else {
            throw ValidationError("--after '\(text)' is not a cursor pushworker deliveries printed (the next of a page before, as it was printed)")
        }
        return cursor
    }

    /// What `--json` prints: `next` is always there, null on the last page.
    struct Page: Encodable {
        let deliveries: [DeliveryRecord]
        let next: String?

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(deliveries, forKey: .deliveries)
            try container.encode(next, forKey: .next)
        }

        enum CodingKeys: String, CodingKey { case deliveries, next }
    }

    func run() async throws {
        var logger = Logger(label: "pushworker.deliveries")
        logger.logLevel = .warning
        let plan = try WorkerPlan.load(file: config)
        guard let ledger = try await plan.openStores(rebuildingIndexes: false, logger: logger).ledger else {
            throw CommandFailure("\(config) keeps no delivery ledger: it is off (ledger: off), or there is no registry and no ledger.sqlite")
        }
        let subject: DeliveryQuery.Subject =
            if let job { .job(job) } else if let user { .user(user) } else if let key { .idempotencyKey(key) } else { .token(DevicePlatform.normalized(token: token ?? "")) }
        let page: DeliveryPage
        do {
            page = try await ledger.page(DeliveryQuery(
                subject, app: app, since: try Self.time(since, option: "--since"), until: try Self.time(until, option: "--until"), limit: limit,
                after: try Self.cursor(after)))
        } catch {
            throw CommandFailure("cannot read the ledger: \(error)")
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            print(String(decoding: try encoder.encode(Page(deliveries: page.records, next: page.next?.text)), as: UTF8.self))
            return
        }
        for record in page.records { print(Self.line(record)) }
        if page.records.isEmpty { FileHandle.standardError.write(Data("no deliveries found\n".utf8)) }
        if let next = page.next {
            FileHandle.standardError.write(Data("more records follow: add --after \(next.text) for the next \(limit)\n".utf8))
        }
    }

    static func line(_ record: DeliveryRecord) -> String {
        let time = RFC3339.string(Date(timeIntervalSince1970: Double(record.at) / 1000))
        let device = record.channel.map { "channel:\($0)" } ?? record.token
        return [time, record.jobID, device, record.token.isEmpty ? "apns" : record.platform.rawValue, record.user ?? "-", record.outcome, record.status.map(String.init) ?? "-", record.reason ?? "-",
                "attempts=\(record.attempts)"].joined(separator: "  ")
    }
}
