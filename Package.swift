// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "pushworker",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "pushworker", targets: ["pushworker"]),
        .library(name: "AMQP", targets: ["AMQP"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    ],
    targets: [
        // librabbitmq 0.11 (Debian librabbitmq-dev) plus a shim for the variadic login call
        // that Swift cannot call directly.
        .target(
            name: "CRabbitMQ",
            linkerSettings: [.linkedLibrary("rabbitmq")]
        ),
        .target(
            name: "AMQP",
            dependencies: [
                "CRabbitMQ",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "PushWorker",
            dependencies: [
                "AMQP",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "pushworker",
            dependencies: [
                "AMQP",
                "PushWorker",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Shared by the test targets: the test broker, its access traits, small helpers.
        .target(
            name: "TestSupport",
            dependencies: ["AMQP"],
            path: "Tests/TestSupport"
        ),
        .testTarget(
            name: "AMQPTests",
            dependencies: ["AMQP", "TestSupport"]
        ),
        .testTarget(
            name: "PushWorkerTests",
            dependencies: ["PushWorker"]
        ),
        // Runs the built `pushworker` program as a process, the way operators and producers do.
        .testTarget(
            name: "pushworkerTests",
            dependencies: ["pushworker", "AMQP", "TestSupport"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
