import CoreMetrics
import Prometheus

/// The process's swift-metrics backend: a Prometheus registry whose text `/metrics` serves.
public enum PrometheusExport {
    /// Request latencies from a millisecond (a local gateway) to APNs' own 15 s timeout.
    static let durationBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
        .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(15),
    ]

    /// A job's time in the worker: a one-device job in milliseconds, a chunk in seconds, the split
    /// of a million-device job in a minute.
    static let jobDurationBuckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
        .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(15), .seconds(60), .seconds(300),
    ]

    /// Makes Prometheus the swift-metrics backend (once per process, before any metric handle is
    /// made: handles made earlier stay no-ops) and returns the registry to render.
    public static func bootstrap() -> PrometheusCollectorRegistry {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = durationBuckets
        factory.durationHistogramBuckets = [
            "pushworker_job_duration_seconds": jobDurationBuckets, "pushworker_job_queue_wait_seconds": jobDurationBuckets,
            "pushworker_schedule_release_lag_seconds": jobDurationBuckets,
        ]
        MetricsSystem.bootstrap(factory)
        return registry
    }
}
