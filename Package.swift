// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "pushworker",
    // Linux only (eventfd, /proc, Glibc): SwiftPM has no way to say so but leaving other
    // platforms out.
    products: [
        .executable(name: "pushworker", targets: ["PushWorkerCLI"]),
        .executable(name: "pushworker-bench", targets: ["pushworker-bench"]),
        .executable(name: "mock-apns", targets: ["mock-apns"]),
        .library(name: "AMQP", targets: ["AMQP"]),
        .library(name: "APNs", targets: ["APNs"]),
        .library(name: "APNsHTTP2", targets: ["APNsHTTP2"]),
        .library(name: "MockAPNs", targets: ["MockAPNs"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "5.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.30.0"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.35.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.1.0"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.7.1"),
        // jwt-kit's own crypto, named for the mock's synchronous check of an FCM grant's signature.
        .package(url: "https://github.com/apple/swift-crypto", "4.1.0"..<"6.0.0"),
        // Deque: the first-in first-out queues (publishes waiting for the confirm window, devices
        // waiting for a slot). Named as swift-nio names it, which depends on it too.
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.1.0"),
    ],
    targets: [
        // librabbitmq 0.11 (Debian librabbitmq-dev) plus a shim for the variadic login call
        // that Swift cannot call directly.
        .target(
            name: "CRabbitMQ",
            linkerSettings: [.linkedLibrary("rabbitmq")]
        ),
        // One box for a struct of many fields, so that copies of it retain one object.
        .target(name: "CopyOnWrite"),
        .target(
            name: "AMQP",
            dependencies: [
                "CRabbitMQ",
                "CopyOnWrite",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // OpenSSL for ES256 provider tokens: the EVP calls live in a small C file, behind
        // functions that take and return plain bytes.
        .target(
            name: "COpenSSL",
            linkerSettings: [.linkedLibrary("crypto")]
        ),
        // libcurl (HTTP/2 through nghttp2): shims for the variadic setopt/getinfo calls.
        .target(
            name: "CCurl",
            linkerSettings: [.linkedLibrary("curl")]
        ),
        // libnghttp2 over OpenSSL: the default APNs transport's connection engine, in C so that
        // nghttp2's per-frame callbacks never cross into Swift (one completion per request does).
        .target(
            name: "CNGHTTP2",
            linkerSettings: [.linkedLibrary("nghttp2"), .linkedLibrary("ssl"), .linkedLibrary("crypto")]
        ),
        // APNs requests, responses, reasons and provider tokens: no transport, so the mock
        // server can validate with the very types the client sends.
        .target(
            name: "CYAJL",
            linkerSettings: [.linkedLibrary("yajl")]
        ),
        .target(
            name: "JSONStream",
            dependencies: ["CYAJL"]
        ),
        // Device tokens held as bytes in fixed-width runs (mmap'd, madvise'd, sorted in place):
        // what lets a worker hold a million-device job. No JSON, no APNs, no broker.
        .target(name: "DeviceTokens"),
        .target(
            name: "APNs",
            dependencies: ["COpenSSL", .product(name: "CoreMetrics", package: "swift-metrics")]
        ),
        // SQLite 3 (Debian libsqlite3-dev) for the embedded registry.
        .target(
            name: "CSQLite",
            linkerSettings: [.linkedLibrary("sqlite3")]
        ),
        // What pushworker keeps: the registry (users, devices, groups, preferences, and the
        // commands that feed it), the delivery ledger and the schedule; the three store
        // protocols, their records and their errors. No database, no broker, no transport.
        .target(
            name: "Stores",
            dependencies: ["APNs", "FCM"]
        ),
        // The three stores in one SQLite file (or two): the embedded default.
        .target(
            name: "SQLiteStores",
            dependencies: ["Stores", "CSQLite", "APNs"]
        ),
        // The three stores on PostgreSQL, for workers on many hosts: postgres-nio (and so NIO)
        // stays out of the Stores module, which the SQLite-only tools and tests use.
        .target(
            name: "PostgresStores",
            dependencies: [
                "Stores",
                "APNs",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Firebase Cloud Messaging's HTTP v1 API without a transport: the service account and
        // its OAuth2 grant (RS256 with jwt-kit), the message and its rules, what an error means.
        .target(
            name: "FCM",
            dependencies: [.product(name: "JWTKit", package: "jwt-kit")]
        ),
        // FCM over HTTP: the service account's access tokens from its token endpoint.
        .target(
            name: "FCMHTTP2",
            dependencies: [
                "FCM", "APNs", "APNsHTTP2", "CCurl", .product(name: "Logging", package: "swift-log"), .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // Registry commands tied to the user's own token (`registry.auth`): JWTs verified with
        // jwt-kit against the configured issuer, audience and keys.
        // Secrets from the environment or from files (`NAME_FILE`), for Docker and Kubernetes
        // secrets mounted as files.
        .target(name: "SecretEnvironment"),
        .target(
            name: "RegistryAuth",
            dependencies: [
                "Stores",
                "SecretEnvironment",
                .product(name: "JWTKit", package: "jwt-kit"),
            ]
        ),
        // The HTTP/2 client and its connection pool, on either transport: libnghttp2 (default)
        // or libcurl's multi interface.
        .target(
            name: "APNsHTTP2",
            dependencies: [
                "APNs",
                "CCurl",
                "CNGHTTP2",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // /metrics, /healthz and /readyz over plain SwiftNIO HTTP/1 (NIO is already in the
        // worker through postgres-nio; three fixed GET routes need no web framework), and the
        // Prometheus backend of swift-metrics. The libraries only use the swift-metrics API.
        .target(
            name: "OperatorEndpoint",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "MockAPNs",
            dependencies: [
                "FCM",
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                "APNs",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "mock-apns",
            dependencies: [
                "FCM",
                "APNs",
                "MockAPNs",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .target(
            name: "PushWorker",
            dependencies: [
                "CopyOnWrite",
                "FCM",
                "FCMHTTP2",
                "AMQP",
                "APNs",
                "APNsHTTP2",
                "JSONStream",
                "DeviceTokens",
                "Stores",
                "SQLiteStores",
                "RegistryAuth",
                "PostgresStores",
                "OperatorEndpoint",
                "SecretEnvironment",
                .product(name: "Yams", package: "Yams"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // What the two programs share: the broker option and the operator-facing failure.
        .target(
            name: "CommandLineSupport",
            dependencies: ["AMQP", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        // The `pushworker` program. Its folder is not `Sources/pushworker`: that and `PushWorker` are
        // one folder on a case-insensitive file system (macOS's default), and the package would not build.
        .executableTarget(
            name: "PushWorkerCLI",
            dependencies: [
                "FCM",
                "FCMHTTP2",
                "AMQP",
                "APNs",
                "APNsHTTP2",
                "CommandLineSupport",
                "OperatorEndpoint",
                "PushWorker",
                "Stores",
                "SQLiteStores",
                "SecretEnvironment",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        // The benchmarks, kept out of the production program (docs/benchmarks.md).
        .executableTarget(
            name: "pushworker-bench",
            dependencies: [
                "FCM",
                "FCMHTTP2",
                "AMQP",
                "APNs",
                "APNsHTTP2",
                "CommandLineSupport",
                "PushWorker",
                "Stores",
                "SQLiteStores",
                "PostgresStores",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // The synthetic PostgreSQL registry is loaded with SQL.
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // glibc's pipe2 and posix_spawn_file_actions_addclosefrom_np, for TestSupport's ChildProcess.
        .target(name: "CChildProcess", path: "Tests/CChildProcess"),
        // Shared by the test targets: the test broker, its access traits, small helpers.
        .target(
            name: "TestSupport",
            dependencies: [
                "AMQP", "APNs", "MockAPNs", "CChildProcess", .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ],
            path: "Tests/TestSupport"
        ),
        .testTarget(
            name: "AMQPTests",
            dependencies: ["AMQP", "CRabbitMQ", "TestSupport"]
        ),
        .testTarget(
            name: "StoresTests",
            dependencies: [
                "Stores", "SQLiteStores", "RegistryAuth", "PostgresStores", "APNs", "TestSupport", .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "FCMTests",
            dependencies: ["FCM", "FCMHTTP2", "APNs", "APNsHTTP2", "CCurl", "MockAPNs", "TestSupport", .product(name: "JWTKit", package: "jwt-kit")]
        ),
        .testTarget(
            name: "DeviceTokensTests",
            dependencies: ["DeviceTokens"]
        ),
        .testTarget(
            name: "JSONStreamTests",
            dependencies: ["JSONStream"]
        ),
        .testTarget(
            name: "APNsTests",
            dependencies: ["APNs", "TestSupport"]
        ),
        .testTarget(
            name: "APNsHTTP2Tests",
            dependencies: ["APNsHTTP2", "MockAPNs", "TestSupport"]
        ),
        .testTarget(
            name: "PushWorkerTests",
            dependencies: [
                "PushWorker", "Stores", "SQLiteStores", "PostgresStores", "APNsHTTP2", "MockAPNs", "AMQP", "SecretEnvironment", "TestSupport",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            resources: [.copy("Fixtures")]
        ),
        // Runs the built `pushworker` program as a process, the way operators and producers do.
        .testTarget(
            name: "PushWorkerCLITests",
            dependencies: [
                "PushWorkerCLI", "pushworker-bench", "mock-apns", "PushWorker", "Stores", "SQLiteStores", "PostgresStores", "AMQP", "APNs", "MockAPNs", "TestSupport",
                .product(name: "Yams", package: "Yams"),
            ],
            // The browser script the /deliveries page's test runs with python3, from its path.
            exclude: ["Browser"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
