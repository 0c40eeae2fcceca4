import ArgumentParser
import CommandLineSupport
import Foundation
import Logging
import PushWorker
import Stores

/// The jobs held until their `send_at`, read and cancelled in the store the workers release
/// them from — no broker or worker needed.
struct ScheduleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schedule",
        abstract: "List, show or cancel the jobs held until their send_at.",
        discussion: """
            Reads the schedule in the delivery ledger's store (the registry's, or ledger.sqlite) that the \
            configuration names. A cancelled job is never released; a job released already cannot be \
            cancelled (the command says so and exits 1).
            """,
        subcommands: [List.self, Show.self, Cancel.self])

    struct Options: ParsableArguments {
        @Option(help: "The worker's configuration file (YAML).") var config: String

        /// The schedule the configuration keeps, or a failure saying why there is none.
        func open() async throws -> JobScheduler {
            var logger = Logger(label: "pushworker.schedule")
            logger.logLevel = .warning
            guard let scheduler = try await WorkerPlan.load(file: config).openScheduler(logger: logger) else {
                throw CommandFailure("\(config) keeps no schedule: it lives in the delivery ledger's store, which is off (ledger: off), or there is no registry and no ledger.sqlite")
            }
            return scheduler
        }
    }

    /// A job named by its id or its idempotency key, and its app when two apps share it.
    struct JobNameOptions: ParsableArguments {
        @Argument(help: "The job's id.") var job: String?
        @Option(help: "The job's idempotency key instead of its id.") var key: String?
        @Option(help: "The job's app (needed when two apps hold jobs of one id).") var app: String?

        func validate() throws {
            guard (job == nil) != (key == nil) else { throw ValidationError("name the job by its id or by --key, not both") }
        }

        var name: HeldJobName { HeldJobName(job.map { .job($0) } ?? .idempotencyKey(key ?? ""), app: app) }
    }

    static func line(_ job: HeldJob) -> String {
        let ended = job.endedAt.map { "  \(job.state == .cancelled ? "cancelled" : "released") \(JobScheduler.rfc3339($0))" } ?? ""
        return [JobScheduler.rfc3339(job.releaseAt), job.app, job.jobID, job.state.rawValue, job.idempotencyKey.map { "key=\($0)" } ?? "-"]
            .joined(separator: "  ") + ended
    }

    static func printJSON(_ object: Any) throws {
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        print(String(decoding: data, as: UTF8.self))
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The held jobs, soonest first: send_at, app, job id, state, idempotency key.")
        @OptionGroup var options: Options
        @Option(help: "Only this app's jobs.") var app: String?
        @Option(help: "Only jobs in this state: waiting, released or cancelled (default: waiting).") var state = "waiting"
        @Flag(help: "Every state.") var all = false
        @Option(help: "At most this many jobs (1–10000).") var limit = 100
        @Flag(help: "Print a JSON array.") var json = false

        func validate() throws {
            guard all || HeldJob.State(rawValue: state) != nil else { throw ValidationError("--state '\(state)' is not waiting, released or cancelled") }
            guard (1...10_000).contains(limit) else { throw ValidationError("--limit \(limit) is not between 1 and 10000") }
        }

        func run() async throws {
            let scheduler = try await options.open()
            let jobs: [HeldJob]
            do {
                jobs = try await scheduler.store.scheduled(app: app, state: all ? nil : HeldJob.State(rawValue: state), limit: limit)
            } catch {
                throw CommandFailure("cannot read the schedule: \(error)")
            }
            if json { return try ScheduleCommand.printJSON(jobs.map(\.json)) }
            for job in jobs { print(ScheduleCommand.line(job)) }
            if jobs.isEmpty { FileHandle.standardError.write(Data("no \(all ? "" : "\(state) ")jobs in the schedule\n".utf8)) }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "One held job, with its body as the producer sent it (JSON).")
        @OptionGroup var options: Options
        @OptionGroup var job: JobNameOptions

        func run() async throws {
            let scheduler = try await options.open()
            let name = job.name
            let found: HeldJob?
            do { found = try await scheduler.store.scheduledJob(name) } catch { throw CommandFailure("\(error.message)") }
            guard let found else { throw CommandFailure("\(name.description) is not in the schedule") }
            var object = found.json
            object["body"] = (try? JSONSerialization.jsonObject(with: Data(found.body.utf8))) ?? found.body
            object["send_at"] = JobScheduler.rfc3339(found.releaseAt)
            try ScheduleCommand.printJSON(object)
        }
    }

    struct Cancel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Cancel a job waiting for its send_at: it is never released.")
        @OptionGroup var options: Options
        @OptionGroup var job: JobNameOptions

        func run() async throws {
            let scheduler = try await options.open()
            let name = job.name
            do {
                let answer = try await scheduler.cancel(name)
                let cancelled = answer["cancelled"] as? [String: Any] ?? [:]
                print("cancelled \(cancelled["app"] ?? "")/\(cancelled["job_id"] ?? ""): it was to be sent at \(JobScheduler.rfc3339(cancelled["send_at"] as? Int64 ?? 0))")
            } catch {
                throw CommandFailure("\(error.message)")
            }
        }
    }
}
