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
        let environment = try #require(container["env"] as? [[String: Any]])
        #expect(Set(environment.compactMap { $0["name"] as? String }) == ["PUSHWORKER_AMQP_URL", "PUSHWORKER_POSTGRES_URL"])

        let keda = try Self.objects("kubernetes/keda-scaledobject.yaml")
        // Both lanes: a worker busy with a broadcast's chunks leaves the jobs queue short. The
        // bulk trigger's pattern covers every app's bulk queue, and no other queue.
        let triggers = try #require(Self.dig(keda["ScaledObject"], "spec", "triggers") as? [[String: Any]])
        #expect(triggers.count == 2)
        #expect(Self.dig(triggers.first, "metadata", "queueName") as? String == configuration.worker.queues.jobs)
        let pattern = try #require(Self.dig(triggers.last, "metadata", "queueName") as? String)
        #expect(Self.dig(triggers.last, "metadata", "useRegex") as? String == "true" && Self.dig(triggers.last, "metadata", "operation") as? String == "sum")
        let bulk = try Regex(pattern)
        for app in configuration.apps {
            #expect(try bulk.wholeMatch(in: configuration.worker.queues.bulkJobs(app: app.name)) != nil, "\(pattern) misses \(app.name)")
        }
        for other in [configuration.worker.queues.jobs, configuration.worker.queues.results, configuration.worker.queues.retryQueue(milliseconds: 5000)] {
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

        let dockerfile = try Self.text("docker/Dockerfile")
        #expect(dockerfile.contains("USER 10001"))
        #expect(dockerfile.contains("EXPOSE 9090"))
        #expect(!dockerfile.split(separator: "\n").contains { $0.hasPrefix("COPY") && ($0.contains(".p8") || $0.contains(".p12")) })
    }
}
