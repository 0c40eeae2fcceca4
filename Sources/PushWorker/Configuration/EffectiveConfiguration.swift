import AMQP
import APNsHTTP2
import Foundation
import PostgresStores
import Yams

/// What `pushworker config check` prints: the configuration a worker would run with, defaults
/// filled in and environment overrides applied, every secret masked, after every check `run`
/// makes before it connects (URLs, ranges, key files, certificate files, environment variables).
public enum EffectiveConfiguration {
    /// The effective configuration as YAML, or the first problem, naming the file and the key.
    /// Opens nothing over the network, and no registry file (opening one would create it).
    public static func check(
        _ configuration: PushWorkerConfiguration, file: String,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) -> String {
        let plan = try WorkerPlan(configuration, file: file, environment: environment)
        let settings = plan.settings
        let amqp = plan.broker.amqp
        let apps = plan.apps.map { Self.app($0.configuration, $0.client, fcm: $0.fcm) }
        // The nodes as listed (`amqp` has them in this process's shuffled order).
        let brokers = settings.brokerURLs(environment: environment)
        let listed = ((try? AMQPConfiguration(urls: brokers.urls))?.addresses ?? amqp.addresses).map(\.redactedURL)
        let source = brokers.key == "PUSHWORKER_AMQP_URL" ? "  (from PUSHWORKER_AMQP_URL)" : ""
        var root: [(String, Node)] = [
            ("amqp", mapping([
                listed.count == 1 && brokers.key != "amqp.urls"
                    ? ("url", scalar(listed[0] + source))
                    : ("urls", .sequence(.init(listed.map { scalar($0 + source) }))),
                ("shuffle", scalar(settings.amqp.shuffle ? "true" : "false")),
                ("prefetch", scalar(settings.amqp.prefetch)),
                ("heartbeat_seconds", scalar(settings.amqp.heartbeatSeconds)),
            ])),
            ("queues", mapping([
                ("exchange", scalar(settings.queues.exchange)),
                ("jobs_routing_key", scalar(settings.queues.jobsRoutingKey)),
                ("jobs", scalar(settings.queues.jobs)),
                ("bulk", scalar(settings.queues.bulkJobs)),
                ("dead_letter_exchange", scalar(settings.queues.deadLetterExchange)),
                ("dead_letters", scalar(settings.queues.deadLetters)),
                ("results", scalar(settings.queues.results)),
                ("registry", scalar(settings.queues.registry)),
                ("registry_routing_key", scalar(settings.queues.registryRoutingKey)),
                ("delivery_limit", scalar(settings.queues.deliveryLimit)),
                ("results_type", scalar(settings.queues.resultsType.rawValue)),
                ("retry_type", scalar(settings.queues.retryType.rawValue)),
                ("tokens", scalar(settings.queues.tokensExchange)),
            ])),
            ("lanes", mapping([
                ("now_prefetch", scalar(settings.lanes.nowPrefetch)),
                ("due_prefetch", scalar(settings.lanes.duePrefetch)),
                ("now_max_devices", scalar(settings.nowMaxDevices)),
                ("now_large_job_bytes", scalar(settings.lanes.nowLargeJobBytes)),
                ("now_share_percent", scalar(settings.lanes.nowSharePercent)),
            ])),
            ("chunk_size", scalar(settings.chunkSize)),
            ("retry_max_attempts", scalar(settings.retryMaxAttempts)),
            ("retry_in_process_attempts", scalar(settings.retryInProcessAttempts)),
            ("retry_delays_ms", Node.sequence(.init(settings.retryDelaysMilliseconds.map { scalar($0) }, .implicit, .flow))),
            ("retry_initial_delay_ms", scalar(settings.retryInitialDelayMilliseconds)),
            ("shutdown_grace_seconds", scalar(settings.shutdownGraceSeconds)),
            ("share_provider_tokens", scalar(settings.shareProviderTokens ? "true" : "false")),
            ("metrics_address", scalar(try Self.metricsAddress(settings, file: file, environment: environment))),
        ]
        if let registry = settings.registry {
            if registry.postgres != nil && registry.sqlite != nil {
                throw ConfigurationError(file: file, key: "registry", "names both sqlite and postgres; choose one")
            }
            var auth: [(String, Node)] = []
            if let settings = registry.auth {
                _ = try configuration.registryAuthKeys(file: file, environment: environment)
                auth = [("issuer", scalar(settings.issuer)), ("audience", scalar(settings.audience))]
                if let keyFile = settings.keyFile { auth.append(("key_file", scalar(keyFile))) }
                if let jwksFile = settings.jwksFile { auth.append(("jwks_file", scalar(jwksFile))) }
                if let variable = settings.hs256SecretEnv { auth.append(("hs256_secret_env", scalar(variable))) }
            }
            let authEntry: [(String, Node)] = auth.isEmpty ? [] : [("auth", mapping(auth))]
            let connections = try PushWorkerConfiguration.postgresConnections(registry, file: file)
            if let postgres = registry.postgres {
                let fromEnvironment = environment["PUSHWORKER_POSTGRES_URL"] != nil
                let url: String
                do { url = try PostgresRegistryStore.redacted(checking: environment["PUSHWORKER_POSTGRES_URL"] ?? postgres) } catch {
                    throw ConfigurationError(file: file, key: fromEnvironment ? "PUSHWORKER_POSTGRES_URL" : "registry.postgres", error.message)
                }
                root.append(("registry", mapping([
                    ("postgres", scalar(url + (fromEnvironment ? "  (from PUSHWORKER_POSTGRES_URL)" : ""))),
                    ("postgres_connections", scalar(connections)),
                ] + authEntry)))
            } else if let sqlite = registry.sqlite, !sqlite.isEmpty {
                root.append(("registry", mapping([("sqlite", scalar(sqlite))] + authEntry)))
            } else {
                throw ConfigurationError(file: file, key: "registry", "names no store; expected {sqlite: FILE} or {postgres: URL}")
            }
        }
        root.append(("ledger", try Self.ledger(settings, file: file)))
        root.append(("apps", .sequence(.init(apps))))
        do {
            return try Yams.serialize(node: mapping(root), sortKeys: false)
        } catch {
            throw ConfigurationError(file: file, key: "", "cannot print the configuration: \(error)")
        }
    }

    /// The ledger and where it is kept: `off`, or its retention and store.
    private static func ledger(_ settings: WorkerSettings, file: String) throws(ConfigurationError) -> Node {
        let ledger = settings.ledger
        guard ledger.enabled else { return scalar("off") }
        let store: String = if let sqlite = ledger.sqlite { sqlite }
            else if let sqlite = settings.registry?.sqlite { "\(sqlite)  (the registry's file)" }
            else if settings.registry?.postgres != nil { "the registry's PostgreSQL, partitioned by day" }
            else { "none: without a registry, ledger.sqlite names its file" }
        var fields: [(String, Node)] = [("retention_days", scalar(ledger.retentionDays)), ("idempotency_hours", scalar(ledger.idempotencyHours)),
            ("schedule_horizon_days", scalar(ledger.scheduleHorizonDays)), ("store", scalar(store))]
        if let variable = ledger.pageTokenEnv { fields.append(("page_token_env", scalar(variable))) }
        return mapping(fields)
    }

    /// `metrics_address` as the worker will use it, checked, and marked when the environment set it.
    private static func metricsAddress(
        _ settings: WorkerSettings, file: String, environment: [String: String]
    ) throws(ConfigurationError) -> String {
        let (address, key) = settings.metricsAddress(environment: environment)
        let source = key == "PUSHWORKER_METRICS_ADDRESS" ? "  (from PUSHWORKER_METRICS_ADDRESS)" : ""
        return (address ?? "null") + source
    }

    private static func app(_ app: AppConfiguration, _ client: APNsClientConfiguration, fcm: FCMPlan?) -> Node {
        var fields: [(String, Node)] = [
            ("name", scalar(app.name)),
            ("topic", scalar(app.topic)),
            ("environment", scalar(app.environment.rawValue)),
            ("url", scalar(client.baseURL)),
            ("management_url", scalar(client.managementURL)),
            ("transport", scalar(client.transport.rawValue)),
            ("connections", scalar(client.connections)),
            ("max_in_flight", scalar(app.effectiveMaxInFlight)),
            ("request_timeout_ms", scalar(Int(client.requestTimeout / .milliseconds(1)))),
            ("ping_interval_seconds", scalar(client.pingInterval.map { Int($0 / .seconds(1)) } ?? 0)),
        ]
        if let expiration = app.defaultExpiration { fields.append(("default_expiration", scalar(expiration.description))) }
        if let results = app.defaultResults { fields.append(("default_results", scalar(results.rawValue))) }
        if let caFile = client.caFile { fields.append(("ca_file", scalar(caFile))) }
        if let proxy = client.proxy { fields.append(("proxy", scalar(redacted(proxy)))) }
        if let token = app.token {
            var credentials: [(String, Node)] = []
            if let keyEnv = token.keyEnv { credentials.append(("key_env", scalar(keyEnv))) } else if let keyFile = token.keyFile {
                credentials.append(("key_file", scalar(keyFile)))
            }
            // Checked by clientConfiguration before this runs: the id is there.
            credentials += [("key_id", scalar(token.effectiveKeyID ?? "")), ("team_id", scalar(token.teamID))]
            fields.append(("token", mapping(credentials)))
        }
        if let certificate = app.certificate {
            var credentials: [(String, Node)] = [("file", scalar(certificate.file)), ("format", scalar(certificate.format ?? "p12"))]
            if let keyFile = certificate.keyFile { credentials.append(("key_file", scalar(keyFile))) }
            if let passwordEnv = certificate.passwordEnv { credentials.append(("password_env", scalar(passwordEnv))) }
            fields.append(("certificate", mapping(credentials)))
        }
        if let fcm, let settings = app.fcm {
            // What the key file says, proved; never the key.
            var side: [(String, Node)] = []
            if let variable = settings.serviceAccountEnv { side.append(("service_account_env", scalar(variable))) } else if let path = settings.serviceAccount {
                side.append(("service_account", scalar(path)))
            }
            side += [
                ("project_id", scalar(fcm.account.projectID)), ("client_email", scalar(fcm.account.clientEmail)),
                ("token_uri", scalar(fcm.account.tokenURI)), ("url", scalar(fcm.client.baseURL)), ("transport", scalar(fcm.client.transport.rawValue)),
                ("connections", scalar(fcm.client.connections)), ("request_timeout_ms", scalar(Int(fcm.client.requestTimeout / .milliseconds(1)))),
            ]
            if let caFile = fcm.client.caFile { side.append(("ca_file", scalar(caFile))) }
            fields.append(("fcm", mapping(side)))
        }
        return mapping(fields)
    }

    /// A URL with its password (if any) replaced by `***`; one that cannot be read as a URL is
    /// not shown at all, as it might hold a password where it cannot be found.
    static func redacted(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.scheme != nil else { return "(not shown: not a well-formed URL)" }
        if components.password != nil { components.password = "***" }
        if components.queryItems?.isEmpty == false { components.query = "…" }
        return components.string ?? "(not shown: not a well-formed URL)"
    }

    private static func scalar(_ value: String) -> Node { Node(value) }
    private static func scalar(_ value: Int) -> Node { Node(String(value)) }
    private static func mapping(_ pairs: [(String, Node)]) -> Node {
        .mapping(.init(pairs.map { (Node($0.0), $0.1) }))
    }
}
