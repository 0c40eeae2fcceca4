import AMQP
import Foundation

/// The worker's broker, queue names and limits. Every field has a default, so a configuration
/// file may hold only `apps`.
public struct WorkerSettings: Sendable, Decodable, Equatable {
    public struct Broker: Sendable, Decodable, Equatable {
        /// amqp:// or amqps://; `PUSHWORKER_AMQP_URL` overrides it, so the password can stay out
        /// of the file.
        public var url: String = "amqp://guest:guest@127.0.0.1:5672/"
        /// Every node of a cluster, one URL each; instead of `url`. `PUSHWORKER_AMQP_URL` may hold
        /// the same list, comma-separated.
        public var urls: [String]?
        /// Whether each process tries the nodes in its own random order, so a fleet spreads over
        /// the cluster; false tries them as listed (a preferred node first).
        public var shuffle = true
        /// Jobs taken from the broker at once; also the number processed concurrently. With
        /// chunks of 1000 devices, 4 keeps thousands of requests in flight without holding more
        /// work than the APNs connections can use.
        public var prefetch: Int = 4
        public var heartbeatSeconds: Int = 30

        enum CodingKeys: String, CodingKey, CaseIterable {
            case url, urls, shuffle, prefetch
            case heartbeatSeconds = "heartbeat_seconds"
        }

        public init() {}

        public init(from decoder: Decoder) throws {
            try KnownKeys.check(decoder, CodingKeys.self)
            let container = try decoder.container(keyedBy: CodingKeys.self)
            url = try container.decodeIfPresent(String.self, forKey: .url) ?? url
            urls = try container.decodeIfPresent([String].self, forKey: .urls)
            shuffle = try container.decodeIfPresent(Bool.self, forKey: .shuffle) ?? shuffle
            if container.contains(.url) && urls != nil {
                throw DecodingError.dataCorruptedError(
                    forKey: .urls, in: container, debugDescription: "give either url (one node) or urls (every node of a cluster), not both")
            }
            prefetch = try container.decodeIfPresent(Int.self, forKey: .prefetch) ?? prefetch
            guard (1...10_000).contains(prefetch) else {
                throw DecodingError.dataCorruptedError(forKey: .prefetch, in: container, debugDescription: "\(prefetch) is not between 1 and 10000")
            }
            heartbeatSeconds = try container.decodeIfPresent(Int.self, forKey: .heartbeatSeconds) ?? heartbeatSeconds
        }
    }

    /// Names of everything the worker declares, so several deployments can share a vhost.
    public struct Names: Sendable, Decodable, Equatable {
        public var exchange = "push"
        public var jobsRoutingKey = "jobs"
        public var jobs = "push.jobs"
        /// The bulk lane: chunks of split jobs, consumed apart from `jobs` so that a small job
        /// never waits behind a broadcast; one queue per app, named this + `.` + the app's name,
        /// so that one app's broadcast never waits behind another's. Default: the jobs queue's
        /// name + `.bulk`.
        public var bulk: String?
        public var deadLetterExchange = "push.dlx"
        public var deadLetters = "push.dead"
        public var results = "push.results"
        /// Registry commands, consumed when a registry is configured.
        public var registry = "push.registry"
        public var registryRoutingKey = "registry"
        /// Deliveries of one job before the broker dead-letters it as poison.
        public var deliveryLimit = 5
        /// The type of the results queue: quorum (replicated; survives a node's loss) or classic
        /// (one node's; the broker spends a fraction of the CPU per result).
        public var resultsType = QueueType.quorum
        /// The type of the delayed retry queues, as for results.
        public var retryType = QueueType.quorum
        /// The fanout exchange over which workers agree on one provider token per key. Default: the
        /// exchange's name + `.tokens`.
        public var tokens: String?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case exchange, jobs, bulk, results, registry
            case jobsRoutingKey = "jobs_routing_key"
            case registryRoutingKey = "registry_routing_key"
            case deadLetterExchange = "dead_letter_exchange"
            case deadLetters = "dead_letters"
            case deliveryLimit = "delivery_limit"
            case resultsType = "results_type"
            case retryType = "retry_type"
            case tokens
        }

        public init() {}

        public init(from decoder: Decoder) throws {
            try KnownKeys.check(decoder, CodingKeys.self)
            let container = try decoder.container(keyedBy: CodingKeys.self)
            exchange = try container.decodeIfPresent(String.self, forKey: .exchange) ?? exchange
            jobsRoutingKey = try container.decodeIfPresent(String.self, forKey: .jobsRoutingKey) ?? jobsRoutingKey
            jobs = try container.decodeIfPresent(String.self, forKey: .jobs) ?? jobs
            bulk = try container.decodeIfPresent(String.self, forKey: .bulk)
            deadLetterExchange = try container.decodeIfPresent(String.self, forKey: .deadLetterExchange) ?? deadLetterExchange
            deadLetters = try container.decodeIfPresent(String.self, forKey: .deadLetters) ?? deadLetters
            results = try container.decodeIfPresent(String.self, forKey: .results) ?? results
            registry = try container.decodeIfPresent(String.self, forKey: .registry) ?? registry
            registryRoutingKey = try container.decodeIfPresent(String.self, forKey: .registryRoutingKey) ?? registryRoutingKey
            deliveryLimit = try container.decodeIfPresent(Int.self, forKey: .deliveryLimit) ?? deliveryLimit
            resultsType = try container.decodeIfPresent(QueueType.self, forKey: .resultsType) ?? resultsType
            retryType = try container.decodeIfPresent(QueueType.self, forKey: .retryType) ?? retryType
            tokens = try container.decodeIfPresent(String.self, forKey: .tokens)
        }

        /// The provider-token exchange in force.
        public var tokensExchange: String { tokens ?? "\(exchange).tokens" }

        /// The bulk lane's queue name prefix in force.
        public var bulkJobs: String { bulk ?? "\(jobs).bulk" }

        /// The bulk lane's queue for `app`'s chunks.
        public func bulkJobs(app: String) -> String { "\(bulkJobs).\(app)" }

        /// Where the schedule releases jobs at their `send_at`: the now lane consumes it beside
        /// `jobs`, so a job due now never waits behind a burst of jobs still to be held (100,000
        /// scheduled for the next minute would otherwise queue its own releases behind them).
        public var dueJobs: String { "\(jobs).due" }

        /// The delayed retry queue for a pause of `milliseconds`.
        public func retryQueue(milliseconds: Int) -> String { "\(jobs).retry.\(milliseconds)ms" }
    }

    /// A queue's type where the configuration chooses it.
    public enum QueueType: String, Sendable, Decodable, Equatable, CaseIterable {
        case quorum, classic

        public init(from decoder: Decoder) throws {
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let type = QueueType(rawValue: text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "'\(text)' is not a queue type: quorum or classic")
            }
            self = type
        }
    }

    /// The bulk lane's queues of `apps`, declared by workers beside `topology` (which knows no apps).
    public func bulkQueues(apps: [String]) -> [AMQPTopology.Queue] {
        apps.map { .durable(queues.bulkJobs(app: $0), quorum: true, deliveryLimit: queues.deliveryLimit, deadLetterExchange: queues.deadLetterExchange) }
    }

    /// Everything declared at start-up and after every reconnect. Retry queues hold retry jobs for
    /// their TTL, then dead-letter them back to the jobs queue through the exchange.
    ///
    /// Jobs, dead letters and registry commands are quorum queues always; results and retry rounds
    /// by default (`results_type`, `retry_type`), so that on a cluster nothing a job needs lives
    /// on one node. A quorum retry queue dead-letters at-least-once (which needs reject-publish
    /// overflow): an expired retry job leaves it only once the jobs queue has it.
    public var topology: AMQPTopology {
        let names = queues
        let retryArguments: AMQPTable = names.retryType == .quorum
            ? ["x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"] : [:]
        var topology = AMQPTopology(
            exchanges: [
                .init(names.exchange, type: "topic"), .init(names.deadLetterExchange, type: "fanout"),
                .init(names.tokensExchange, type: "fanout"),
            ],
            queues: [
                .durable(names.jobs, quorum: true, deliveryLimit: names.deliveryLimit, deadLetterExchange: names.deadLetterExchange),
                .durable(names.dueJobs, quorum: true, deliveryLimit: names.deliveryLimit, deadLetterExchange: names.deadLetterExchange),
                .durable(names.deadLetters, quorum: true),
                .durable(names.results, quorum: names.resultsType == .quorum),
            ] + retryDelaysMilliseconds.map {
                .durable(names.retryQueue(milliseconds: $0), quorum: names.retryType == .quorum, deadLetterExchange: names.exchange,
                    deadLetterRoutingKey: names.jobsRoutingKey, messageTTL: .milliseconds($0), extraArguments: retryArguments)
            },
            bindings: [
                .init(queue: names.jobs, exchange: names.exchange, routingKey: names.jobsRoutingKey),
                .init(queue: names.deadLetters, exchange: names.deadLetterExchange, routingKey: ""),
            ])
        if registry != nil {
            // Quorum with a delivery limit, as for jobs: a command the store keeps failing on ends
            // in the dead letters instead of looping.
            topology.queues.append(.durable(names.registry, quorum: true, deliveryLimit: names.deliveryLimit, deadLetterExchange: names.deadLetterExchange))
            topology.bindings.append(.init(queue: names.registry, exchange: names.exchange, routingKey: names.registryRoutingKey))
        }
        return topology
    }

    /// The delivery ledger: every device's final result kept, for asking later and so that a job
    /// that comes back after a fault sends no device twice. On by default, in the registry's store;
    /// `ledger: off` turns it off, `sqlite` names a file of its own (the only place for it without
    /// a registry).
    public struct Ledger: Sendable, Decodable, Equatable {
        public var enabled = true
        /// Days a record is kept (1–3650).
        public var retentionDays = 30
        /// An SQLite file (relative to the configuration file).
        public var sqlite: String?
        /// Hours a job's `idempotency_key` keeps later jobs of the same key from being sent
        /// (1 to the retention).
        public var idempotencyHours = 24
        /// The environment variable holding the bearer token of the `/deliveries` search page on
        /// the operator endpoint; nil: no page (it shows tokens and user ids).
        public var pageTokenEnv: String?
        /// How far ahead a job's `send_at` may be, in days (1 to 3650). Scheduled jobs are held in
        /// the ledger's store.
        public var scheduleHorizonDays = 30

        public init() {}

        enum CodingKeys: String, CodingKey, CaseIterable {
            case retentionDays = "retention_days", sqlite
            case idempotencyHours = "idempotency_hours"
            case pageTokenEnv = "page_token_env"
            case scheduleHorizonDays = "schedule_horizon_days"
        }

        public init(from decoder: Decoder) throws {
            // `off` (or false): YAML may read the word as a boolean or as a string.
            if let single = try? decoder.singleValueContainer() {
                if let flag = try? single.decode(Bool.self) {
                    enabled = flag
                    return
                }
                if let word = try? single.decode(String.self) {
                    guard word == "off" || word == "on" else {
                        throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "'\(word)' is not off, on or a mapping {retention_days, sqlite}"))
                    }
                    enabled = word == "on"
                    return
                }
            }
            try KnownKeys.check(decoder, CodingKeys.self)
            let container = try decoder.container(keyedBy: CodingKeys.self)
            retentionDays = try container.decodeIfPresent(Int.self, forKey: .retentionDays) ?? retentionDays
            sqlite = try container.decodeIfPresent(String.self, forKey: .sqlite)
            idempotencyHours = try container.decodeIfPresent(Int.self, forKey: .idempotencyHours) ?? idempotencyHours
            pageTokenEnv = try container.decodeIfPresent(String.self, forKey: .pageTokenEnv)
            scheduleHorizonDays = try container.decodeIfPresent(Int.self, forKey: .scheduleHorizonDays) ?? scheduleHorizonDays
        }
    }

    /// Where users, devices, groups and preferences are kept; none: only explicit tokens.
    public struct Registry: Sendable, Decodable, Equatable {
        /// An SQLite file, shared by the workers of one host (relative to the configuration file).
        public var sqlite: String?
        /// A PostgreSQL URL, for workers on many hosts.
        public var postgres: String?
        /// The connections a worker holds open to PostgreSQL: the fleet's workers times this must
        /// stay under the server's `max_connections`. Nil when not set (8), so that setting it on
        /// an SQLite registry is told, whatever the number.
        public var postgresConnections: Int?
        /// Commands tied to the user's own token; off when absent.
        public var auth: Auth?

        public static let defaultPostgresConnections = 8
        /// A worker's statements are few and short (lookups and records in batches): past this, more
        /// connections only cost the server.
        public static let postgresConnectionsRange = 1...64

        public init(sqlite: String? = nil, postgres: String? = nil, auth: Auth? = nil) {
            self.sqlite = sqlite
            self.postgres = postgres
            self.auth = auth
        }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case sqlite, postgres, auth
            case postgresConnections = "postgres_connections"
        }

        public init(from decoder: Decoder) throws {
            try KnownKeys.check(decoder, CodingKeys.self)
            let container = try decoder.container(keyedBy: CodingKeys.self)
            sqlite = try container.decodeIfPresent(String.self, forKey: .sqlite)
            postgres = try container.decodeIfPresent(String.self, forKey: .postgres)
            postgresConnections = try container.decodeIfPresent(Int.self, forKey: .postgresConnections)
            auth = try container.decodeIfPresent(Auth.self, forKey: .auth)
        }

        /// `registry.auth`: every command that names a user carries `auth`, that user's JWT from
        /// `issuer` for `audience`, verified with one of the key sources.
        public struct Auth: Sendable, Decodable, Equatable {
            public var issuer: String
            public var audience: String
            /// A PEM public key (ES256 or RS256), relative to the configuration file.
            public var keyFile: String?
            /// A JSON Web Key Set file, relative to the configuration file.
            public var jwksFile: String?
            /// The environment variable holding an HS256 secret (never the secret itself).
            public var hs256SecretEnv: String?

            enum CodingKeys: String, CodingKey, CaseIterable {
                case issuer, audience
                case keyFile = "key_file", jwksFile = "jwks_file", hs256SecretEnv = "hs256_secret_env"
            }

            public init(from decoder: Decoder) throws {
                try KnownKeys.check(decoder, CodingKeys.self)
                let container = try decoder.container(keyedBy: CodingKeys.self)
                issuer = try container.decode(String.self, forKey: .issuer)
                audience = try container.decode(String.self, forKey: .audience)
                keyFile = try container.decodeIfPresent(String.self, forKey: .keyFile)
                jwksFile = try container.decodeIfPresent(String.self, forKey: .jwksFile)
                hs256SecretEnv = try container.decodeIfPresent(String.self, forKey: .hs256SecretEnv)
            }
        }
    }

    /// Two lanes through the worker, so a one-device job never queues behind a broadcast's
    /// chunks: the now lane is the jobs queue producers publish to; a job with more devices than
    /// `now_max_devices` is split there into chunk jobs on the bulk queue. Each lane has its own
    /// consumer, prefetch and results connection, and the now lane keeps a share of every app's
    /// `max_in_flight` that the bulk lane never takes.
    public struct Lanes: Sendable, Decodable, Equatable {
        /// Now-lane jobs taken from the broker at once (and processed concurrently). Most are one
        /// device each, and each waits on a few round trips (APNs, the result's confirm, the
        /// ledger): 16 at a time bounded a busy worker by their latency, not by its CPU (64 ran
        /// faster in every alternated run, at less CPU per job; docs/benchmarks.md). Large bodies
        /// among them take turns (`nowLargeJobBytes`), so 64 in hand do not cost 64 decoded lists.
        public var nowPrefetch = 64
        /// Released jobs (from `push.jobs.due`) the now lane takes at once, beside `nowPrefetch`:
        /// jobs come due in bursts (a campaign's minute), mostly one device each, and 16 at a time
        /// caps a worker at what 16 round trips allow (100,000 in a minute lagged 4.7 s at p99).
        public var duePrefetch = 64
        /// Bytes of producers' job bodies over 64 KiB (about 980 tokens) the now lane works on
        /// (decodes, then splits or sends) at once; the others wait in hand. A body is held several
        /// times its size while it is decoded and split, so this, not `nowPrefetch`, bounds that
        /// memory (`JobBodyBudget`).
        public var nowLargeJobBytes = 8 << 20
        /// Devices above which a job goes to the bulk lane as chunk jobs; nil: `chunk_size`.
        public var nowMaxDevices: Int?
        /// Percent of each app's `max_in_flight` kept for the now lane.
        public var nowSharePercent = 10

        enum CodingKeys: String, CodingKey, CaseIterable {
            case nowPrefetch = "now_prefetch"
            case duePrefetch = "due_prefetch"
            case nowLargeJobBytes = "now_large_job_bytes"
            case nowMaxDevices = "now_max_devices"
            case nowSharePercent = "now_share_percent"
        }

        public init() {}

        public init(from decoder: Decoder) throws {
            try KnownKeys.check(decoder, CodingKeys.self)
            let container = try decoder.container(keyedBy: CodingKeys.self)
            nowPrefetch = try container.decodeIfPresent(Int.self, forKey: .nowPrefetch) ?? nowPrefetch
            duePrefetch = try container.decodeIfPresent(Int.self, forKey: .duePrefetch) ?? duePrefetch
            nowLargeJobBytes = try container.decodeIfPresent(Int.self, forKey: .nowLargeJobBytes) ?? nowLargeJobBytes
            nowMaxDevices = try container.decodeIfPresent(Int.self, forKey: .nowMaxDevices)
            nowSharePercent = try container.decodeIfPresent(Int.self, forKey: .nowSharePercent) ?? nowSharePercent
            // Each range where it is read, so the error names its key; now_max_devices is
            // checked against chunk_size where both are known (`WorkerSettings`).
            guard (1...10_000).contains(nowPrefetch) else {
                throw DecodingError.dataCorruptedError(forKey: .nowPrefetch, in: container, debugDescription: "\(nowPrefetch) is not between 1 and 10000")
            }
            guard (1...10_000).contains(duePrefetch) else {
                throw DecodingError.dataCorruptedError(forKey: .duePrefetch, in: container, debugDescription: "\(duePrefetch) is not between 1 and 10000")
            }
            guard (1 << 16...1 << 30).contains(nowLargeJobBytes) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .nowLargeJobBytes, in: container,
                    debugDescription: "\(nowLargeJobBytes) is not between 65536 and 1073741824 (bytes of large job bodies the now lane works on at once)")
            }
            guard (0...90).contains(nowSharePercent) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .nowSharePercent, in: container,
                    debugDescription: "\(nowSharePercent) is not between 0 and 90 (percent of each app's max_in_flight kept for the now lane)")
            }
        }

        /// The admission slots of an app with `maxInFlight` kept for the now lane: at least
        /// one when the share is not zero, and never all of them.
        public func nowReserve(ofMaxInFlight maxInFlight: Int) -> Int {
            guard nowSharePercent > 0 else { return 0 }
            return min(max(1, maxInFlight * nowSharePercent / 100), maxInFlight - 1)
        }
    }

    public var amqp = Broker()
    public var queues = Names()
    public var lanes = Lanes()
    public var registry: Registry?
    public var retryMaxAttempts = 6
    /// Attempts one worker makes per device before handing it on to a delayed retry queue.
    public var retryInProcessAttempts = 3
    /// Pauses of the successive retry rounds; the last repeats.
    public var retryDelaysMilliseconds = [5_000, 30_000, 120_000]
    /// Devices above which a job is split into chunk jobs that any worker can take.
    public var chunkSize = 1000
    public var retryInitialDelayMilliseconds = 200
    /// Seconds a worker takes to finish what it holds after SIGTERM.
    public var shutdownGraceSeconds = 30
    public var ledger = Ledger()
    /// Whether the workers agree on one provider token per key over the broker (the tokens
    /// exchange), so APNs sees one token however many replicas run; false: each signs its own.
    public var shareProviderTokens = true
    /// `host:port` of `/metrics`, `/healthz` and `/readyz`; nil (`null` in the file) serves none.
    /// Loopback by default: a container or pod sets `0.0.0.0:9090` for its scraper and probes.
    public var metricsAddress: String? = "127.0.0.1:9090"

    /// Read from the top level of the configuration file, beside `apps`: the file's unknown keys
    /// are refused there (`PushWorkerConfiguration`), which knows both sets.
    enum CodingKeys: String, CodingKey, CaseIterable {
        case amqp, queues, registry, lanes, ledger
        case chunkSize = "chunk_size"
        case retryMaxAttempts = "retry_max_attempts"
        case retryInProcessAttempts = "retry_in_process_attempts"
        case retryDelaysMilliseconds = "retry_delays_ms"
        case retryInitialDelayMilliseconds = "retry_initial_delay_ms"
        case shutdownGraceSeconds = "shutdown_grace_seconds"
        case shareProviderTokens = "share_provider_tokens"
        case metricsAddress = "metrics_address"
    }

    public init() {}

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        amqp = try container.decodeIfPresent(Broker.self, forKey: .amqp) ?? amqp
        queues = try container.decodeIfPresent(Names.self, forKey: .queues) ?? queues
        registry = try container.decodeIfPresent(Registry.self, forKey: .registry)
        lanes = try container.decodeIfPresent(Lanes.self, forKey: .lanes) ?? lanes
        ledger = try container.decodeIfPresent(Ledger.self, forKey: .ledger) ?? ledger
        retryMaxAttempts = try container.decodeIfPresent(Int.self, forKey: .retryMaxAttempts) ?? retryMaxAttempts
        retryInProcessAttempts = try container.decodeIfPresent(Int.self, forKey: .retryInProcessAttempts) ?? retryInProcessAttempts
        retryDelaysMilliseconds = try container.decodeIfPresent([Int].self, forKey: .retryDelaysMilliseconds) ?? retryDelaysMilliseconds
        chunkSize = try container.decodeIfPresent(Int.self, forKey: .chunkSize) ?? chunkSize
        retryInitialDelayMilliseconds = try container.decodeIfPresent(Int.self, forKey: .retryInitialDelayMilliseconds) ?? retryInitialDelayMilliseconds
        shutdownGraceSeconds = try container.decodeIfPresent(Int.self, forKey: .shutdownGraceSeconds) ?? shutdownGraceSeconds
        shareProviderTokens = try container.decodeIfPresent(Bool.self, forKey: .shareProviderTokens) ?? shareProviderTokens
        // Chunk jobs carry (token, user) pairs; up to 10,000 they stay well under the 1 MiB above
        // which a body is streamed.
        guard (1...10_000).contains(chunkSize) else {
            throw DecodingError.dataCorruptedError(forKey: .chunkSize, in: container, debugDescription: "\(chunkSize) is not between 1 and 10000")
        }
        if let most = lanes.nowMaxDevices, !(1...chunkSize).contains(most) {
            throw DecodingError.dataCorrupted(.init(
                codingPath: container.codingPath + [CodingKeys.lanes as any CodingKey, Lanes.CodingKeys.nowMaxDevices],
                debugDescription: "\(most) is not between 1 and chunk_size (\(chunkSize)): a job that fits one chunk is sent where it is"))
        }
        guard !retryDelaysMilliseconds.isEmpty, retryDelaysMilliseconds.allSatisfy({ $0 > 0 }) else {
            throw DecodingError.dataCorruptedError(
                forKey: .retryDelaysMilliseconds, in: container, debugDescription: "needs at least one positive number of milliseconds")
        }
        // Absent: the default; present as null: off.
        if container.contains(.metricsAddress) {
            metricsAddress = try container.decodeNil(forKey: .metricsAddress) ? nil : try container.decode(String.self, forKey: .metricsAddress)
        }
    }

    /// The operator endpoint's address in force, and the key it came from (for errors):
    /// `PUSHWORKER_METRICS_ADDRESS` wins over the file, so that several workers started from one
    /// configuration on one host each take a port of their own. `null` there turns it off.
    public func metricsAddress(environment: [String: String] = ProcessInfo.processInfo.environment) -> (address: String?, key: String) {
        if let set = environment["PUSHWORKER_METRICS_ADDRESS"] {
            return (set == "null" ? nil : set, "PUSHWORKER_METRICS_ADDRESS")
        }
        return (metricsAddress, "metrics_address")
    }

    /// The host and port of the operator endpoint (see `metricsAddress(environment:)`), and the key
    /// they came from; nil when it is off.
    public func metricsEndpoint(
        file: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) -> (host: String, port: Int, key: String)? {
        let (configured, key) = metricsAddress(environment: environment)
        guard let address = configured else { return nil }
        let refusal = ConfigurationError(file: file, key: key, "'\(address)' is not HOST:PORT (e.g. 127.0.0.1:9090, or 0.0.0.0:9090 in a container), or null to serve no metrics")
        guard let colon = address.lastIndex(of: ":") else { throw refusal }
        var host = String(address[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, let port = Int(address[address.index(after: colon)...]), (0...65_535).contains(port) else { throw refusal }
        return (host, port, key)
    }

    /// Devices above which a job leaves the now lane as chunk jobs on the bulk lane.
    public var nowMaxDevices: Int { lanes.nowMaxDevices ?? chunkSize }

    /// How devices are retried: all attempts, this worker's share, and the first backoff.
    public var retryPolicy: RetryPolicy {
        RetryPolicy(
            maxAttempts: max(1, retryMaxAttempts), inProcessAttempts: max(1, retryInProcessAttempts),
            initialDelay: .milliseconds(retryInitialDelayMilliseconds))
    }

    /// The broker nodes in force: `PUSHWORKER_AMQP_URL` (comma-separated), else `amqp.urls`, else
    /// `amqp.url`; and the key they came from, for errors.
    public func brokerURLs(environment: [String: String] = ProcessInfo.processInfo.environment) -> (urls: [String], key: String) {
        if let listed = environment["PUSHWORKER_AMQP_URL"] {
            return (AMQPConfiguration.urls(inList: listed), "PUSHWORKER_AMQP_URL")
        }
        if let urls = amqp.urls { return (urls, "amqp.urls") }
        return ([amqp.url], "amqp.url")
    }

    /// The broker configuration, with the environment's URL winning over the file's.
    public func amqpConfiguration(file: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> AMQPConfiguration {
        let (urls, key) = brokerURLs(environment: environment)
        var configuration: AMQPConfiguration
        do { configuration = try AMQPConfiguration(urls: urls, shuffled: amqp.shuffle) } catch {
            throw ConfigurationError(file: file, key: key, "\(error)")
        }
        if Set(configuration.addresses.map(\.node)).count < configuration.addresses.count {
            throw ConfigurationError(file: file, key: key, "names a node twice: \(configuration.redactedURLs)")
        }
        configuration.heartbeat = .seconds(amqp.heartbeatSeconds)
        configuration.topology = topology
        return configuration
    }
}
