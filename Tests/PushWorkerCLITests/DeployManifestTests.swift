import Foundation
import PushWorker
import Testing
import Yams

/// The deployment files agree with the worker they deploy: the configuration they carry parses,
/// the probes and the scraper find the endpoint, the grace periods nest, the autoscaler watches
/// the queue the workers consume. (`deploy/check.sh` checks the manifests against Kubernetes'
/// schemas; no cluster or container engine runs here.)
@Suite("deploy/docker and deploy/kubernetes")
struct DeployManifestTests {
    static let deploy = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("deploy")

    static func text(_ path: String) throws -> String {
        try String(contentsOf: deploy.appendingPathComponent(path), encoding: .utf8)
    }

    /// The objects of a multi-document YAML file, by kind.
    static func objects(_ path: String) throws -> [String: [String: Any]] {
        var byKind: [String: [String: Any]] = [:]
        for document in try Yams.load_all(yaml: try text(path)) {
            let object = try #require(document as? [String: Any])
            byKind[try #require(object["kind"] as? String)] = object
        }
        return byKind
    }

    static func dig(_ value: Any?, _ path: String...) -> Any? {
        path.reduce(value) { ($0 as? [String: Any])?[$1] }
    }

    @Test("Kubernetes: the ConfigMap's configuration parses; probes, scraper, grace period, key mount and KEDA's queues (both lanes) match it")
    func kubernetes() throws {
        let configMap = try #require(try Self.objects("kubernetes/configmap.yaml")["ConfigMap"])
        let yaml = try #require(Self.dig(configMap, "data", "pushworker.yaml") as? String)
        let configuration = try PushWorkerConfiguration.parse(yaml, file: "configmap.yaml")
        let endpoint = try #require(try configuration.worker.metricsEndpoint(file: "configmap.yaml", environment: [:]))
        #expect(endpoint.host == "0.0.0.0")

        let deployment = try #require(try Self.objects("kubernetes/deployment.yaml")["Deployment"])
        let pod = try #require(Self.dig(deployment, "spec", "template", "spec") as? [String: Any])
        let grace = try #require(pod["terminationGracePeriodSeconds"] as? Int)
        #expect(grace > configuration.worker.shutdownGraceSeconds, "terminationGracePeriodSeconds \(grace) must exceed shutdown_grace_seconds")
        let container = try #require((pod["containers"] as? [[String: Any]])?.first)
        let ports = try #require(container["ports"] as? [[String: Any]])
        let metricsPort = try #require(ports.first { $0["name"] as? String == "metrics" }?["containerPort"] as? Int)
        #expect(metricsPort == endpoint.port)
        #expect(Self.dig(container, "livenessProbe", "httpGet", "path") as? String == "/healthz")
        #expect(Self.dig(container, "readinessProbe", "httpGet", "path") as? String == "/readyz")
        #expect(Self.dig(container, "livenessProbe", "httpGet", "port") as? String == "metrics")
        #expect(Self.dig(container, "readinessProbe", "httpGet", "port") as? String == "metrics")
        let annotations = try #require(Self.dig(deployment, "spec", "template", "metadata", "annotations") as? [String: String])
        #expect(annotations["prometheus.io/port"] == "\(endpoint.port)" && annotations["prometheus.io/path"] == "/metrics")
        #expect(Self.dig(pod, "securityContext", "runAsNonRoot") as? Bool == true)
        #expect(Self.dig(container, "resources", "limits", "memory") as? String != nil)

        // Every app's key file lies in the Secret's mount, and that mount holds it.
        let mounts = try #require(container["volumeMounts"] as? [[String: Any]])
        let keyMount = try #require(mounts.first { $0["name"] as? String == "apns-key" }?["mountPath"] as? String)
        let volumes = try #require(pod["volumes"] as? [[String: Any]])
        let items = try #require(Self.dig(volumes.first { $0["name"] as? String == "apns-key" }, "secret", "items") as? [[String: Any]])
        for app in configuration.apps {
            let keyFile = try #require(app.token?.keyFile, "app \(app.name) has no key_file")
            #expect(items.contains { "\(keyMount)/\($0["path"] as? String ?? "")" == keyFile }, "\(keyFile) is not mounted")
        }
        // The URLs come as files from the Secret (NAME_FILE), never as values in the environment.
        let environment = try #require(container["env"] as? [[String: Any]])
        #expect(Set(environment.compactMap { $0["name"] as? String }) == ["PUSHWORKER_AMQP_URL_FILE", "PUSHWORKER_POSTGRES_URL_FILE"])
        for variable in environment {
            let path = try #require(variable["value"] as? String, "\(variable) has no file path")
            let mount = try #require(mounts.first { path.hasPrefix("\($0["mountPath"] as? String ?? "")/") }, "\(path) is in no mount")
            let volume = volumes.first { $0["name"] as? String == mount["name"] as? String }
            let secretItems = Self.dig(volume, "secret", "items") as? [[String: Any]] ?? []
            #expect(secretItems.contains { "\(mount["mountPath"] as? String ?? "")/\($0["path"] as? String ?? "")" == path }, "\(path) is not an item of its Secret volume")
        }

        let keda = try Self.objects("kubernetes/keda-scaledobject.yaml")
        // Both lanes: a worker busy with a broadcast's chunks leaves the jobs queue short. The
        // bulk trigger's pattern covers every app's bulk queue, and no other queue.
        let triggers = try #require(Self.dig(keda["ScaledObject"], "spec", "triggers") as? [[String: Any]])
        #expect(triggers.count == 3)
        #expect(Self.dig(triggers.first, "metadata", "queueName") as? String == configuration.worker.queues.jobs)
        #expect(Self.dig(triggers[1], "metadata", "queueName") as? String == configuration.worker.queues.dueJobs)
        let pattern = try #require(Self.dig(triggers.last, "metadata", "queueName") as? String)
        #expect(Self.dig(triggers.last, "metadata", "useRegex") as? String == "true" && Self.dig(triggers.last, "metadata", "operation") as? String == "sum")
        let bulk = try Regex(pattern)
        for app in configuration.apps {
            #expect(try bulk.wholeMatch(in: configuration.worker.queues.bulkJobs(app: app.name)) != nil, "\(pattern) misses \(app.name)")
        }
        for other in [configuration.worker.queues.jobs, configuration.worker.queues.dueJobs, configuration.worker.queues.results, configuration.worker.queues.retryQueue(milliseconds: 5000)] {
            #expect(try bulk.wholeMatch(in: other) == nil, "\(pattern) matches \(other)")
        }
        #expect(Self.dig(keda["ScaledObject"], "spec", "scaleTargetRef", "name") as? String == Self.dig(deployment, "metadata", "name") as? String)
        let pdb = try #require(try Self.objects("kubernetes/pdb.yaml")["PodDisruptionBudget"])
        #expect(Self.dig(pdb, "spec", "selector", "matchLabels") as? [String: String] == Self.dig(deployment, "spec", "selector", "matchLabels") as? [String: String])
    }

    @Test("Docker: the compose stack's configuration parses and serves metrics on all interfaces; the image runs as a user, with no key baked in")
    func docker() throws {
        let configuration = try PushWorkerConfiguration.parse(try Self.text("docker/pushworker.yaml"), file: "pushworker.yaml")
        #expect(try configuration.worker.metricsEndpoint(file: "pushworker.yaml", environment: [:])! == ("0.0.0.0", 9090, "metrics_address"))
        let compose = try #require(try Yams.load(yaml: try Self.text("docker/compose.yaml")) as? [String: Any])
        let worker = try #require(Self.dig(compose, "services", "worker") as? [String: Any])
        #expect(Self.dig(worker, "deploy", "replicas") as? Int == 3)
        let stop = try #require(worker["stop_grace_period"] as? String)
        #expect(Int(stop.dropLast())! > configuration.worker.shutdownGraceSeconds)
        #expect(Self.dig(compose, "services", "rabbitmq", "image") as? String == "rabbitmq:3.10-management")

        // Hardened as the Kubernetes Deployment: no capabilities beyond those named, no privilege
        // gained; the workers' health is `pushworker health`; the broker URL only as a file.
        let services = try #require(compose["services"] as? [String: [String: Any]])
        for (name, service) in services {
            #expect(service["cap_drop"] as? [String] == ["ALL"], "\(name) keeps its capabilities")
            #expect(service["security_opt"] as? [String] == ["no-new-privileges:true"], "\(name) may gain privileges")
        }
        #expect(worker["read_only"] as? Bool == true && Self.dig(services["mock-apns"], "read_only") as? Bool == true)
        #expect((Self.dig(worker, "healthcheck", "test") as? [String])?.starts(with: ["CMD", "pushworker", "health"]) == true)
        let workerEnvironment = try #require(worker["environment"] as? [String: String])
        #expect(workerEnvironment["PUSHWORKER_AMQP_URL"] == nil)
        let urlFile = try #require(workerEnvironment["PUSHWORKER_AMQP_URL_FILE"])
        #expect(urlFile == "/run/secrets/amqp_url" && worker["secrets"] as? [String] == ["amqp_url"])
        let secretFile = try #require(Self.dig(compose, "secrets", "amqp_url", "file") as? String)
        #expect(try Self.text("docker/" + secretFile).hasPrefix("amqp://"))
        #expect(Self.dig(services["mock-apns"], "image") as? String != worker["image"] as? String, "the mock shares the worker's image")

        let dockerfile = try Self.text("docker/Dockerfile")
        #expect(dockerfile.contains("USER 10001"))
        #expect(dockerfile.contains("EXPOSE 9090"))
        #expect(!dockerfile.split(separator: "\n").contains { $0.hasPrefix("COPY") && ($0.contains(".p8") || $0.contains(".p12")) })
        // The runtime stage (the last, the default target): the worker only, its HEALTHCHECK, OCI labels.
        let runtime = try #require(dockerfile.components(separatedBy: "\nFROM ").last)
        #expect(runtime.hasPrefix("scratch AS runtime"))
        #expect(!runtime.contains("mock-apns"))
        #expect(runtime.contains(#"HEALTHCHECK --interval=15s --timeout=10s --start-period=60s --retries=3 CMD ["pushworker", "health""#))
        for label in ["version", "revision", "source", "created"] { #expect(runtime.contains("org.opencontainers.image.\(label)=")) }
    }

    /// The metric names the dashboard and the alerts read: pushworker's documented ones, or
    /// RabbitMQ's and Kubernetes'.
    static func metricNames(in expression: String) throws -> Set<String> {
        // Every name of ours, RabbitMQ's or kube-state-metrics', whatever it ends with: a typo
        // anywhere in it makes a name the docs do not have.
        let names = expression.matches(of: /\b(pushworker|rabbitmq|kube)_[a-z_]+\b/).map { String($0.output.0) }
        return Set(names.map { $0.replacing(/_(bucket|count|sum)$/, with: "") })
    }

    static func documentedMetrics() throws -> Set<String> {
        let operations = try String(contentsOf: deploy.deletingLastPathComponent().appendingPathComponent("docs/operations.md"), encoding: .utf8)
        return Set(operations.matches(of: /^\| `(pushworker_[a-z_]+)`/.anchorsMatchLineEndings()).map { String($0.output.1) })
    }

    @Test("Prometheus alert rules: the same as docs/operations.md's, on documented metrics; the Grafana dashboard: importable, every query on a documented metric")
    func monitoring() throws {
        let documented = try Self.documentedMetrics()
        #expect(documented.count >= 12, "\(documented)")
        func known(_ name: String) -> Bool { documented.contains(name) || name.hasPrefix("rabbitmq_") || name.hasPrefix("kube_") }

        let rules = try #require(Self.dig(try Yams.load(yaml: try Self.text("prometheus/alerts.yaml")), "groups") as? [[String: Any]])
        let fileRules = rules.flatMap { $0["rules"] as? [[String: Any]] ?? [] }
        let operations = try String(contentsOf: Self.deploy.deletingLastPathComponent().appendingPathComponent("docs/operations.md"), encoding: .utf8)
        let block = try #require(operations.firstMatch(of: /## Alerts worth having\n\n[^`]*```yaml\n(?<yaml>[\s\S]*?)```/)?.output.yaml)
        let docRules = try #require(Self.dig(try Yams.load(yaml: String(block)), "groups") as? [[String: Any]]).flatMap { $0["rules"] as? [[String: Any]] ?? [] }
        func summary(_ rules: [[String: Any]]) -> [String] { rules.map { "\($0["alert"] ?? "") | \($0["expr"] ?? "") | \($0["for"] ?? "-")" } }
        #expect(summary(fileRules) == summary(docRules))
        #expect(fileRules.count == 13)
        for rule in fileRules {
            let expression = try #require(rule["expr"] as? String)
            for name in try Self.metricNames(in: expression) { #expect(known(name), "\(rule["alert"] ?? ""): \(name) is not a documented metric") }
            #expect((Self.dig(rule, "annotations", "summary") as? String)?.isEmpty == false)
            #expect(Self.dig(rule, "labels", "severity") != nil)
        }
        let tests = try Self.text("prometheus/alerts.test.yaml")
        for rule in fileRules { #expect(tests.contains("alertname: \(rule["alert"] ?? "")"), "\(rule["alert"] ?? "") has no unit test") }

        let dashboard = try #require(try JSONSerialization.jsonObject(with: Data(try Self.text("grafana/pushworker-dashboard.json").utf8)) as? [String: Any])
        #expect((dashboard["__inputs"] as? [[String: Any]])?.first?["name"] as? String == "DS_PROMETHEUS")
        let panels = try #require(dashboard["panels"] as? [[String: Any]])
        #expect(Set(panels.compactMap { $0["id"] as? Int }).count == panels.count, "panel ids repeat")
        var queried = Set<String>()
        for panel in panels where panel["type"] as? String != "row" {
            #expect(Self.dig(panel, "datasource", "uid") as? String == "${DS_PROMETHEUS}")
            let targets = try #require(panel["targets"] as? [[String: Any]], "\(panel["title"] ?? "")")
            #expect(!targets.isEmpty)
            for target in targets {
                for name in try Self.metricNames(in: try #require(target["expr"] as? String)) {
                    #expect(known(name), "\(panel["title"] ?? ""): \(name) is not a documented metric")
                    queried.insert(name)
                }
            }
        }
        // Jobs and devices, outcomes and reasons, waits, latency, in-flight, retries, provider
        // tokens, broker fail-overs; FCM's latency, in-flight, quota, grants and refusals.
        for name in ["pushworker_notifications_total", "pushworker_job_duration_seconds", "pushworker_job_queue_wait_seconds", "pushworker_apns_request_duration_seconds",
                     "pushworker_apns_requests_in_flight", "pushworker_retries_handed_on_total", "pushworker_provider_token_refreshes_total", "pushworker_amqp_failovers_total",
                     "pushworker_fcm_request_duration_seconds", "pushworker_fcm_requests_in_flight", "pushworker_fcm_quota_exceeded_total", "pushworker_fcm_grants_total",
                     "pushworker_fcm_credentials_refused"] {
            #expect(queried.contains(name), "no panel shows \(name)")
        }
    }
}
