import ArgumentParser
import CommandLineSupport
import Foundation
import Logging
import PushWorker
import Registry

/// What the ledger holds for a job, a user or a device: "did user X get notification Y on
/// Tuesday, and what did APNs say?", answered from the store the workers write, newest first.
struct DeliveriesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deliveries",
        abstract: "Show the delivery ledger's records for a job, a user or a device token, newest first.",
        discussion: """
            Reads the ledger the configuration keeps (ledger: in the registry's store, or ledger.sqlite). \
            One line per device: when its result was final, the job, the token, the user, the outcome, \
            APNs' status and reason, and the attempts. --json prints a JSON array of the records.
            """)

    @Option(help: "The worker's configuration file (YAML).") var config: String
    @Option(help: "A job's id.") var job: String?
    @Option(help: "A user id.") var user: String?
    @Option(help: "A device token (hex).") var token: String?
    @Option(help: "Only records from this time on: RFC 3339 or Unix seconds.") var since: String?
    @Option(help: "Only records up to this time: RFC 3339 or Unix seconds.") var until: String?
    @Option(help: "At most this many records (1–10000).") var limit = 100
    @Flag(help: "Print a JSON array of the records.") var json = false

    func validate() throws {
        guard [job, user, token].compactMap({ $0 }).count == 1 else { throw ValidationError("name exactly one of --job, --user and --token") }
        guard (1...DeliveryQuery.maximumLimit).contains(limit) else { throw ValidationError("--limit \(limit) is not between 1 and \(DeliveryQuery.maximumLimit)") }
        _ = try Self.time(since, option: "--since")
        _ = try Self.time(until, option: "--until")
    }

    /// Milliseconds since 1970.
    static func time(_ text: String?, option: String) throws -> Int64? {
        guard let text else { return nil }
        if let seconds = Int64(text) { return seconds * 1000 }
        guard let date = JobDecoder.rfc3339(text) else { throw ValidationError("\(option) '\(text)' is not RFC 3339 (2026-11-24T09:00:00Z) or Unix seconds") }
        return Int64((date.timeIntervalSince1970 * 1000).rounded())
    }

    func run() async throws {
        var logger = Logger(label: "pushworker.deliveries")
        logger.logLevel = .warning
        let plan = try WorkerPlan.load(file: config)
        let store = try await plan.configuration.openRegistryStore(file: config, logger: logger)
        guard let ledger = try await plan.openLedger(registry: store, rebuildingIndexes: false, logger: logger) else {
            throw CommandFailure("\(config) keeps no delivery ledger: it is off (ledger: off), or there is no registry and no ledger.sqlite")
        }
        let subject: DeliveryQuery.Subject = if let job { .job(job) } else if let user { .user(user) } else { .token(token?.lowercased() ?? "") }
        let records: [DeliveryRecord]
        do {
            records = try await ledger.deliveries(DeliveryQuery(
                subject, since: try Self.time(since, option: "--since"), until: try Self.time(until, option: "--until"), limit: limit))
        } catch {
            throw CommandFailure("cannot read the ledger: \(error)")
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            print(String(decoding: try encoder.encode(records), as: UTF8.self))
            return
        }
        for record in records { print(Self.line(record)) }
        if records.isEmpty { FileHandle.standardError.write(Data("no deliveries found\n".utf8)) }
    }

    static func line(_ record: DeliveryRecord) -> String {
        let time = RFC3339.string(Date(timeIntervalSince1970: Double(record.at) / 1000))
        let device = record.channel.map { "channel:\($0)" } ?? record.token
        return [time, record.jobID, device, record.user ?? "-", record.outcome, record.status.map(String.init) ?? "-", record.reason ?? "-",
                "attempts=\(record.attempts)"].joined(separator: "  ")
    }
}
