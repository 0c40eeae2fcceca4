import AMQP
import APNsHTTP2
import ArgumentParser
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Logging
import PushWorker
import SQLiteStores
import Stores
import CommandLineSupport

/// A worker (a `pushworker run` child process) between a real broker and an HTTP/2 APNs server
/// (or, with `--platform fcm`, FCM's HTTP v1 API on the same kind of server): devices per second
/// from publishing a job to its last result, the latency of one-device jobs, and the worker's
/// peak memory, read from its own /proc entry so the benchmark's job body and result consumer are
/// not counted.
struct E2EBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "e2e",
        abstract: "Publish a job of N tokens, run a worker against an APNs server, wait for all N results; then time one-device jobs.")

    @OptionGroup var amqp: AMQPOptions
    @Option(help: "APNs server base URL, e.g. https://127.0.0.1:2197") var url: String
    @Option(name: .customLong("ca-file"), help: "PEM CA to trust for the server.") var caFile: String
    @Option(name: .customLong("key-file"), help: "Provider token key (.p8).") var keyFile: String
    @Option(name: .customLong("key-id"), help: "The key's id (10 characters), as the server knows it.") var keyID: String
    @Option(name: .customLong("team-id"), help: "The team id (10 characters) the provider tokens name.") var teamID: String
    @Option(help: "Topic.") var topic = "com.example.app"
    @Option(help: "Devices in the large job.") var count = 100_000
    @Option(help: "One-device jobs timed one after another.") var jobs = 1000
    @Option(help: "Connections to the server: APNs', or FCM's with --platform fcm.") var connections = 1
    @Option(help: "The large job's devices: apns (audience.tokens and an APNs payload) or fcm (audience.fcm_tokens and a notification, through the app's fcm: side).")
    var platform: DevicePlatform = .apns
    @Option(name: .customLong("service-account"), help: "With --platform fcm: the app's service account key file (its token_uri is asked for the access token).")
    var serviceAccount: String?
    @Option(name: .customLong("fcm-url"), help: "With --platform fcm: FCM's base URL (default --url: one server answering both).") var fcmURL: String?
    @Option(name: .customLong("job-size"), help: "Publish the --count devices as jobs of at most this many (default one job).")
    var jobSize: Int?
    @Option(help: "The app's HTTP/2 transport: nghttp2 or curl.") var transport: APNsTransport = .nghttp2
    @Option(name: .customLong("max-in-flight"), help: "The app's max_in_flight (devices in flight at once; default the worker's).") var maxInFlight: Int?
    @Option(name: .customLong("now-prefetch"), help: "The worker's lanes.now_prefetch (one-device jobs taken at once; default the worker's).") var nowPrefetch: Int?
    @Option(name: .customLong("due-prefetch"), help: "The worker's lanes.due_prefetch (released jobs taken at once; default the worker's).") var duePrefetch: Int?
    @Flag(help: "Give the worker an SQLite registry of the same devices (N users in group 'all') and time the job again as a group job, in the same run.")
    var group = false
    @Flag(name: .customLong("group-first"), help: "With --group: time the group job before the explicit one (the second job of a run meets a busier broker).")
    var groupFirst = false
    @Option(name: .customLong("results-type"), help: "The results queue's type, quorum (the worker's default) or classic: what a per-device result costs the broker.")
    var resultsType: WorkerSettings.QueueType = .quorum
    @Option(help: "Worker processes sharing the job; on a cluster (--amqp listing its nodes) worker i prefers node i.")
    var workers = 1
    @Flag(help: "Instead: time a broadcast of --count devices (results: failures) alone, then with one-device jobs published every --interval-ms while it runs, then alone again: the one-device jobs' latency and the broadcast's rate with them.")
    var lanes = false
    @Option(name: .customLong("interval-ms"), help: "With --lanes: milliseconds between one-device jobs.") var intervalMilliseconds = 250
    @Option(help: "Instead: publish N one-device jobs whose send_at is spread over --schedule-over seconds, and time each one's release lag (send_at to summary). Needs a ledger (--ledger sqlite or postgres).")
    var schedule: Int?
    @Option(name: .customLong("schedule-over"), help: "With --schedule: seconds the send_at times spread over.") var scheduleOver = 60.0
    @Option(name: .customLong("schedule-lead"), help: "With --schedule: seconds from the first publish to the first send_at.") var scheduleLead = 20.0
    @Flag(name: .customLong("local-time"), help: "With --group: instead, one group job with a local_time a minute or two ahead: how long it takes to hold it by zone, the peak memory, and the rate once released. Needs --ledger sqlite (the registry's file keeps it).")
    var localTime = false
    @Option(name: .customLong("cancel-after"), help: "Instead: cancel the --count-device job (results: all) once this many devices have their result, and print how many were delivered after the cancel. Needs a ledger.")
    var cancelAfter: Int?
    @Option(name: .customLong("results"), help: "The large job's results: all (a message per device), batched, failures or none.")
    var resultsMode: PushJob.ResultsMode = .all
    @Option(name: .customLong("broker-pid"), help: "The broker's process ids (comma-separated: a cluster's Erlang VMs), to print its CPU per device.")
    var brokerPIDs: String?
    @Option(help: "The delivery ledger: off (no registry), sqlite (a file of its own), postgres (the --postgres-url registry's, partitioned by day) or postgres-off (that registry, ledger off).")
    var ledger: LedgerChoice = .off
    @Option(name: .customLong("postgres-url"), help: "With --ledger postgres or postgres-off: an empty database for the registry.") var postgresURL: String?
    @Flag(name: .customLong("random-tokens"), help: "The large job's tokens look random, as APNs's do (the default ascends: cheap for an index on tokens).")
    var randomTokens = false
    @Option(name: .customLong("compare-metrics"), help: "Instead: time the job this many times with metrics off and as many with metrics on (a new worker each, in the order off, on, on, off, …), and compare.")
    var compareMetrics: Int?

    func run() async throws {
        if platform == .fcm {
            guard serviceAccount != nil else { throw ValidationError("--platform fcm needs --service-account") }
            // The worker refuses fcm_tokens beside users and groups, and those runs time their own
            // jobs, not the large one this option shapes.
            guard !group, !lanes, schedule == nil, cancelAfter == nil, !randomTokens else {
                throw ValidationError("--platform fcm times the large job (and --compare-metrics) only: not with --group, --lanes, --schedule, --cancel-after or --random-tokens")
            }
        }
        if jobSize != nil, group || lanes || schedule != nil || cancelAfter != nil {
            throw ValidationError("--job-size shapes the large job only: not with --group, --lanes, --schedule or --cancel-after")
        }
        let prefix = "pushworker.bench.\(UUID().uuidString.prefix(8).lowercased())"
        _ = try amqp.configuration()  // refuses a malformed URL before anything starts
        let rawURL = amqp.resolvedURL
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix).yaml")
        var registryLine = ""
        switch ledger {
        case .off: registryLine = "ledger: off"
        case .sqlite: registryLine = "ledger: {sqlite: \(FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-ledger.db").path)}"
        case .postgres, .postgresOff:
            guard let postgresURL else { throw ValidationError("--ledger \(ledger.rawValue) needs --postgres-url") }
            registryLine = "registry: {postgres: \"\(postgresURL)\"}" + (ledger == .postgresOff ? "\nledger: off" : "")
        }
        if group {
            let database = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix).db").path
            try await SyntheticRegistry(members: count, small: 0, groups: 10, filteredPercent: 0).load(into: try SQLiteRegistryStore(path: database))
            registryLine = "registry: {sqlite: \(database)}"
        }
        defer {
            for suffix in ["db", "db-wal", "db-shm"] {
                try? FileManager.default.removeItem(at: FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix).\(suffix)"))
                try? FileManager.default.removeItem(at: FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-ledger.\(suffix)"))
            }
        }
        let metricsPort = 19_000 + Int.random(in: 0..<1000)
        let nodes = AMQPConfiguration.urls(inList: rawURL)
        /// `amqp:` of worker `index`: on a cluster, every node, the index-th first.
        func amqpLine(_ index: Int) -> String {
            guard nodes.count > 1 else { return #"amqp: {url: "\#(rawURL)"}"# }
            let first = index % nodes.count
            let order = nodes[first...] + nodes[..<first]
            return "amqp: {urls: [\(order.map { "\"\($0)\"" }.joined(separator: ", "))], shuffle: false}"
        }
        // The FCM side's connections are the APNs side's number, so the two platforms' runs
        // compare at one pool size.
        let fcmLine = serviceAccount.map {
            "    fcm: {service_account: \($0), url: \(fcmURL ?? url), ca_file: \(caFile), connections: \(connections)}"
        } ?? ""
        let lanesSettings = [nowPrefetch.map { "now_prefetch: \($0)" }, duePrefetch.map { "due_prefetch: \($0)" }].compactMap { $0 }
        let lanesLine = lanesSettings.isEmpty ? "" : "lanes: {\(lanesSettings.joined(separator: ", "))}"
        /// The worker's configuration, with or without its metrics endpoint.
        func configurationText(metrics: Bool, worker index: Int = 0) -> String { """
            \(registryLine)
            metrics_address: \(metrics ? "127.0.0.1:\(metricsPort + index)" : "null")
            \(lanesLine)
            \(amqpLine(index))
            queues: {exchange: \(prefix).push, jobs: \(prefix).jobs, dead_letter_exchange: \(prefix).dlx, dead_letters: \(prefix).dead, results: \(prefix).results, registry: \(prefix).registry, results_type: \(resultsType.rawValue)}
            apps:
              - name: bench
                topic: \(topic)
                environment: sandbox
                url: \(url)
                ca_file: \(caFile)
                connections: \(connections)
                transport: \(transport)
                max_in_flight: \(maxInFlight ?? AppConfiguration.defaultMaxInFlight)
                token: {key_file: \(keyFile), key_id: \(keyID), team_id: \(teamID)}
            \(fcmLine)
            """
        }
        try Data(configurationText(metrics: false).utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let configuration = try PushWorkerConfiguration.load(file: file.path)
        /// A `pushworker run` child on the configuration file as it is now.
        func startWorker(_ file: URL = file) throws -> Process {
            let worker = Process()
            // The `pushworker` built beside this program (the same build directory, or /usr/local/bin).
            let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
                .appendingPathComponent("pushworker").path
            worker.executableURL = URL(fileURLWithPath: "/bin/sh")
            // PUSHWORKER_BENCH_WRAPPER (a profiler, e.g. "heaptrack -o /tmp/worker") runs in front of the worker.
            worker.arguments = ["-c", "exec ${PUSHWORKER_BENCH_WRAPPER:-} \"$0\" run --config \"$1\" --log-level warning", executable, file.path]
            try worker.run()
            return worker
        }
        var worker = try startWorker()
        defer { if worker.isRunning { worker.terminate() } }
        // Further workers, each with its own file (its own preferred node).
        var others: [Process] = []
        for index in 1..<max(workers, 1) {
            let other = file.deletingPathExtension().appendingPathExtension("\(index).yaml")
            try Data(configurationText(metrics: false, worker: index).utf8).write(to: other)
            others.append(try startWorker(other))
        }
        defer {
            for other in others where other.isRunning { other.terminate() }
            for index in 1..<max(workers, 1) { try? FileManager.default.removeItem(at: file.deletingPathExtension().appendingPathExtension("\(index).yaml")) }
        }
        /// CPU seconds of every worker process so far.
        func workersCPU() -> Double { ([worker] + others).map { CPUTime.of($0.processIdentifier) }.reduce(0, +) }

        let amqpConfiguration = try BrokerPlan(configuration.worker, apps: configuration.apps.map(\.name), file: file.path).declaring("pushworker-bench e2e")
        let publisher = try await AMQPPublisher.connect(amqpConfiguration)
        let results = try await AMQPConsumer.connect(amqpConfiguration, queue: "\(prefix).results", prefetch: 1000)
        var iterator = results.makeAsyncIterator()

        // The clock starts once the worker is up and its connection open (and, for FCM, its access
        // token taken): one job through first.
        try await publisher.publish(.toQueue("\(prefix).jobs", body: Array(Self.oneDeviceJob(id: "warm-up", index: 0, platform: platform).utf8)))
        guard let warmUp = try await iterator.next() else { throw CommandFailure("the results consumer stopped") }
        try await warmUp.ack()

        /// Ends a run that measured one thing: the worker stopped, the connections closed.
        func finish(printingPeak: Bool = false) async throws {
            if printingPeak {
                print(String(format: "worker peak memory (VmHWM of the pushworker run process) %.1f MiB", Double(PeakMemory.kibibytes(of: worker.processIdentifier)) / 1024))
            }
            worker.terminate()
            try await Self.waitForExit(worker)
            await results.close()
            await publisher.close()
        }

        if let schedule {
            try await ScheduleBench(
                publisher: publisher, jobsQueue: "\(prefix).jobs", count: schedule, lead: scheduleLead, over: scheduleOver, workersCPU: workersCPU
            ).measure(results: &iterator, workerPID: worker.processIdentifier)
            try await finish()
            return
        }

        if lanes {
            try await LaneBench(
                publisher: publisher, jobsQueue: "\(prefix).jobs", count: count, interval: .milliseconds(intervalMilliseconds), workersCPU: workersCPU
            ).measure(results: &iterator)
            try await finish(printingPeak: true)
            return
        }

        // Throughput: one job of `count` tokens, from publish to its last result.
        var body = #"{"id": "bench", "audience": {"tokens": ["#
        if platform == .apns && (jobSize ?? count) >= count {
            body.reserveCapacity(count * 67 + 100)
            for index in 0..<count {
                if index > 0 { body += "," }
                body += "\"" + (randomTokens ? SyntheticRegistry.randomToken(index) : SyntheticRegistry.token(index)) + "\""
            }
        }
        body += #"]}, "results": "\#(resultsMode.rawValue)", "payload": {"aps": {"alert": "benchmark"}}}"#
        if group && localTime {
            try await LocalTimeBench(
                publisher: publisher, jobsQueue: "\(prefix).jobs", count: count, workerPID: worker.processIdentifier, workersCPU: workersCPU
            ).measure(results: &iterator)
            try await finish()
            return
        }
        if let cancelAfter {
            try await CancelBench(
                publisher: publisher, jobsQueue: "\(prefix).jobs", count: count, cancelAfter: cancelAfter, configurationFile: file.path,
                chunkSize: configuration.worker.chunkSize
            ).measure(results: &iterator, body: Array(body.replacingOccurrences(of: #""results": "\#(resultsMode.rawValue)""#, with: #""results": "all""#).utf8))
            try await finish(printingPeak: true)
            return
        }
        let chunks = (count + configuration.worker.chunkSize - 1) / configuration.worker.chunkSize
        let perJob = min(jobSize ?? count, count)
        guard perJob >= 1 else { throw ValidationError("--job-size must be 1 or more") }
        /// The large job's bodies: the one built above, or `count` devices cut into jobs of `perJob`.
        func largeJobs() -> [[UInt8]] {
            if platform == .apns && perJob == count { return [Array(body.utf8)] }
            return stride(from: 0, to: count, by: perJob).map { start in
                Array(Self.job(id: "bench-\(start / perJob)", devices: start..<min(start + perJob, count), platform: platform, results: resultsMode,
                    token: randomTokens ? SyntheticRegistry.randomToken : SyntheticRegistry.token).utf8)
            }
        }
        let published = platform == .apns && perJob == count ? 1 : (count + perJob - 1) / perJob
        let brokers = (brokerPIDs ?? "").split(separator: ",").compactMap { Int32($0.trimmingCharacters(in: .whitespaces)) }
        /// CPU seconds of the broker's processes so far (0 when none were named).
        func brokerCPU() -> Double { brokers.map(CPUTime.of).reduce(0, +) }

        /// Publishes the jobs and reads until the summaries account for all `count` devices (each
        /// summary follows its chunk's results): the devices delivered, as the summaries count
        /// them, the per-device results read (one per `result` message, each entry of a `results`
        /// one), and, for FCM, those of them that say `platform: "fcm"` (the devices did go there).
        func measure(_ jobs: [[UInt8]]) async throws -> (seconds: Double, delivered: Int, reported: Int, android: Int) {
            let start = ContinuousClock.now
            for job in jobs {
                try await publisher.publish(.toQueue("\(prefix).jobs", body: job, properties: AMQPProperties(persistent: true)))
            }
            var final = 0, delivered = 0, reported = 0, android = 0
            let decoder = JSONDecoder()
            while final < count {
                guard let delivery = try await iterator.next() else { throw CommandFailure("the results consumer stopped") }
                try await delivery.ack()
                switch delivery.properties.type {
                case "summary":
                    let summary = try decoder.decode(JobSummary.self, from: Data(delivery.body))
                    final += summary.outcomes.values.reduce(0, +)
                    delivered += summary.outcomes[.delivered] ?? 0
                case "results":
                    reported += Self.occurrences(of: Self.resultStart, in: delivery.body)
                    if platform == .fcm { android += Self.occurrences(of: Self.androidResult, in: delivery.body) }
                default:
                    reported += 1
                    if platform == .fcm { android += Self.occurrences(of: Self.androidResult, in: delivery.body) }
                }
            }
            return ((ContinuousClock.now - start) / .seconds(1), delivered, reported, android)
        }

        if let rounds = compareMetrics {
            // Each round a fresh worker: off, on, on, off, … so neither setting always meets the
            // broker busier with the previous run's results.
            var seconds: [Bool: [Double]] = [false: [], true: []]
            var cpu: [Bool: Double] = [false: 0, true: 0]
            for round in 0..<(2 * rounds) {
                let metrics = round % 4 == 1 || round % 4 == 2
                worker.terminate()
                try await Self.waitForExit(worker)
                try Data(configurationText(metrics: metrics).utf8).write(to: file)
                worker = try startWorker()
                try await publisher.publish(.toQueue("\(prefix).jobs", body: Array(Self.oneDeviceJob(id: "warm-up-\(round)", index: 0, platform: platform).utf8)))
                guard let warm = try await iterator.next() else { throw CommandFailure("the results consumer stopped") }
                try await warm.ack()
                let cpuBefore = CPUTime.of(worker.processIdentifier)
                let run = try await measure(largeJobs())
                let used = CPUTime.of(worker.processIdentifier) - cpuBefore
                seconds[metrics]!.append(run.seconds)
                cpu[metrics]! += used
                var scraped = ""
                if metrics {
                    let (data, _) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(metricsPort)/metrics")!)
                    let page = String(decoding: data, as: UTF8.self)
                    let delivered = page.split(separator: "\n").first { $0.hasPrefix(#"pushworker_notifications_total{app="bench",outcome="delivered""#) }
                    scraped = "; /metrics: " + (delivered.map(String.init) ?? "no delivered counter")
                }
                print(String(format: "metrics %@: %d devices in %.2f s = %.0f devices/s (%d delivered; worker CPU %.1f µs per device)%@",
                    metrics ? "on " : "off", count, run.seconds, Double(count) / run.seconds, run.delivered, used / Double(count) * 1e6, scraped))
            }
            let off = seconds[false]!.reduce(0, +), on = seconds[true]!.reduce(0, +)
            print(String(format: "metrics on / off, devices/s over %d runs each: %.3f (target >= 0.97); CPU per device on / off: %.3f",
                rounds, off / on, cpu[true]! / cpu[false]!))
            worker.terminate()
            try await Self.waitForExit(worker)
            await results.close()
            await publisher.close()
            return
        }

        func explicitJob() async throws -> Double {
            let cpuBefore = workersCPU(), brokerBefore = brokerCPU()
            let explicit = try await measure(largeJobs())
            let cpu = workersCPU() - cpuBefore, broker = brokerCPU() - brokerBefore
            let shape = published == 1 ? "\(chunks) chunks" : "\(published) jobs of \(perJob)"
            print(String(format: "pushworker-bench e2e: %d %@devices in %.2f s = %.0f devices/s from publish to last result (%d delivered, %@; %d worker(s), worker CPU %.1f µs per device)",
                count, platform == .fcm ? "FCM " : "", explicit.seconds, Double(count) / explicit.seconds, explicit.delivered, shape, max(workers, 1),
                cpu / Double(count) * 1e6))
            print("   ledger: \(ledger.rawValue)")
            print(String(format: "   results: %@, %d per-device results read%@%@", resultsMode.rawValue, explicit.reported,
                platform == .fcm ? " (\(explicit.android) with platform fcm)" : "",
                brokers.isEmpty ? "" : String(format: "; broker CPU %.1f µs per device", broker / Double(count) * 1e6)))
            return explicit.seconds
        }
        func groupJob() async throws -> Double {
            let cpuBefore = CPUTime.of(worker.processIdentifier)
            let grouped = try await measure([Array(#"{"id": "bench-group", "audience": {"groups": ["all"]}, "payload": {"aps": {"alert": "benchmark"}}}"#.utf8)])
            let cpu = CPUTime.of(worker.processIdentifier) - cpuBefore
            print(String(format: "pushworker-bench e2e --group: %d devices of group 'all' in %.2f s = %.0f devices/s (%d delivered; worker CPU %.1f µs per device)",
                count, grouped.seconds, Double(count) / grouped.seconds, grouped.delivered, cpu / Double(count) * 1e6))
            return grouped.seconds
        }
        if group {
            let grouped = groupFirst ? try await groupJob() : 0
            let explicit = try await explicitJob()
            let groupSeconds = groupFirst ? grouped : try await groupJob()
            print(String(format: "group job / explicit tokens, same run: %.2f (target >= 0.9)", explicit / groupSeconds))
        } else {
            _ = try await explicitJob()
        }
        body = ""

        // Latency: one-device jobs, one at a time, publish to summary.
        var latencies: [Double] = []
        for index in 0..<jobs {
            let job = Self.oneDeviceJob(id: "one-\(index)", index: index, platform: platform)
            let sent = ContinuousClock.now
            try await publisher.publish(.toQueue("\(prefix).jobs", body: Array(job.utf8)))
            guard let summary = try await iterator.next() else { throw CommandFailure("the results consumer stopped") }
            latencies.append((ContinuousClock.now - sent) / .milliseconds(1))
            try await summary.ack()
        }
        latencies.sort()
        if !latencies.isEmpty {
            print(String(format: "one-device job latency over %d jobs: p50 %.2f ms, p99 %.2f ms", jobs,
                latencies[latencies.count / 2], latencies[min(latencies.count - 1, latencies.count * 99 / 100)]))
        }
        print(String(format: "worker peak memory (VmHWM of the pushworker run process) %.1f MiB", Double(PeakMemory.kibibytes(of: worker.processIdentifier)) / 1024))
        worker.terminate()
        try await Self.waitForExit(worker)
        await results.close()
        await publisher.close()
    }

    /// Polls: Foundation's `waitUntilExit` spun this task's thread at a full core (an empty run
    /// loop on Linux) for as long as the worker took to exit, seen at 3 minutes under heaptrack.
    static func waitForExit(_ worker: Process) async throws {
        while worker.isRunning { try await Task.sleep(for: .milliseconds(20)) }
    }

    /// How each result of a `results` message begins (its keys are sorted).
    static let resultStart = Array(#"{"apns_id":"#.utf8)

    static func occurrences(of pattern: [UInt8], in bytes: [UInt8]) -> Int {
        guard let first = pattern.first, bytes.count >= pattern.count else { return 0 }
        var found = 0
        var index = 0
        let last = bytes.count - pattern.count
        while index <= last {
            if bytes[index] == first, bytes[index..<(index + pattern.count)].elementsEqual(pattern) {
                found += 1
                index += pattern.count
            } else {
                index += 1
            }
        }
        return found
    }

    /// How an Android device's result says so, as the worker writes it: counted so a run shows its
    /// devices went to FCM, not to APNs.
    static let androidResult = Array(#""platform":"fcm""#.utf8)

    static func oneDeviceJob(id: String, index: Int, platform: DevicePlatform = .apns) -> String {
        guard platform == .fcm else {
            return #"{"id": "\#(id)", "audience": {"tokens": ["\#(String(format: "%064x", index + 1))"]}, "payload": {"aps": {}}, "results": "none"}"#
        }
        return #"{"id": "\#(id)", "audience": {"fcm_tokens": ["\#(fcmToken(index))"]}, "notification": {"title": "warm-up"}, "results": "none"}"#
    }

    /// A distinct token of a registration token's usual form and length (an instance id, a colon,
    /// the token): the worker checks the form, and the length is what each request body carries.
    static func fcmToken(_ index: Int) -> String {
        "bench" + String(format: "%08d", index) + "abcdefghijk:APA91bH" + String(repeating: "k7-_Qw", count: 20)
    }

    /// What an Android device of the large job is sent: a notification and FCM's usual options,
    /// as bench.sh's h2load sends FCM (`{"message":{"token":…,"android":…,"notification":…}}`).
    static let fcmFields = #""notification": {"title": "Benchmark", "body": "Hello from pushworker"}, "fcm": {"android": {"priority": "high", "ttl": 3600}}"#

    /// A job of the large job's devices `devices`: APNs tokens (`token`) with the one large job's
    /// payload, or Android ones with `fcmFields`.
    static func job(id: String, devices: Range<Int>, platform: DevicePlatform, results: PushJob.ResultsMode, token: (Int) -> String) -> String {
        let key = platform == .fcm ? "fcm_tokens" : "tokens"
        var body = #"{"id": "\#(id)", "audience": {"\#(key)": ["#
        body.reserveCapacity(devices.count * (platform == .fcm ? 156 : 67) + 300)
        for index in devices {
            if index > devices.lowerBound { body += "," }
            body += "\"" + (platform == .fcm ? fcmToken(index) : token(index)) + "\""
        }
        let message = platform == .fcm ? fcmFields : #""payload": {"aps": {"alert": "benchmark"}}"#
        return body + #"]}, "results": "\#(results.rawValue)", \#(message)}"#
    }
}

/// Where the e2e benchmark's worker keeps its delivery ledger.
enum LedgerChoice: String, ExpressibleByArgument, CaseIterable {
    case off, sqlite, postgres
    case postgresOff = "postgres-off"
}
