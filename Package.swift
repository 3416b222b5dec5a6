// swift-tools-version: 6.2
// The push provider: four services, the APNs sandbox and the operator CLI, over rabbitmq-c, hiredis,
// nghttp2 and OpenSSL. Layers are described in DESIGN.md; C stays in the `C*` system-library targets
// and in the one wrapper module that owns each library.

import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

/// What the package needs: the lowest versions it works with (`from:`), as a library states them.
let minimumVersions: [(url: String, from: Version)] = [
    ("https://github.com/apple/swift-log.git", "1.16.2"),
    ("https://github.com/apple/swift-metrics.git", "2.13.0"),
    ("https://github.com/apple/swift-argument-parser.git", "1.8.2"),
    ("https://github.com/apple/swift-configuration.git", "1.4.0"),
    ("https://github.com/swift-server/swift-service-lifecycle.git", "2.13.0"),
    ("https://github.com/swift-server/swift-prometheus.git", "2.4.1"),
    ("https://github.com/hummingbird-project/hummingbird.git", "2.28.1"),
    ("https://github.com/apple/swift-nio.git", "2.101.2"),
    ("https://github.com/apple/swift-crypto.git", "3.12.3"),
    ("https://github.com/apple/swift-nio-extras.git", "1.35.2"),
    ("https://github.com/apple/swift-http-types.git", "1.8.0"),
    ("https://github.com/hummingbird-project/swift-mustache.git", "2.1.1"),
]

/// Every package of the resolved graph (direct and transitive) at the version the tests last passed
/// with. With `PUSH_EXACT_DEPENDENCIES=1` (the image build, deploy/Dockerfile) the graph is exactly
/// this, not the newest versions the ranges above allow: Package.resolved cannot be committed here,
/// since the local package mirror's commit ids are not upstream's. scripts/checks/containers.sh
/// fails when this table differs from what `swift build` resolved, so it moves with the tests.
let testedVersions: [(url: String, version: Version)] = [
    ("https://github.com/apple/swift-algorithms.git", "1.2.1"),
    ("https://github.com/apple/swift-argument-parser.git", "1.8.2"),
    ("https://github.com/apple/swift-asn1.git", "1.7.4"),
    ("https://github.com/apple/swift-async-algorithms.git", "1.1.4"),
    ("https://github.com/apple/swift-atomics.git", "1.3.0"),
    ("https://github.com/apple/swift-certificates.git", "1.21.1"),
    ("https://github.com/apple/swift-collections.git", "1.6.0"),
    ("https://github.com/apple/swift-configuration.git", "1.4.0"),
    ("https://github.com/apple/swift-crypto.git", "3.12.3"),
    ("https://github.com/apple/swift-distributed-tracing.git", "1.7.3"),
    ("https://github.com/apple/swift-http-structured-headers.git", "1.7.0"),
    ("https://github.com/apple/swift-http-types.git", "1.8.0"),
    ("https://github.com/apple/swift-log.git", "1.16.2"),
    ("https://github.com/apple/swift-metrics.git", "2.13.0"),
    ("https://github.com/apple/swift-nio-extras.git", "1.35.2"),
    ("https://github.com/apple/swift-nio-http2.git", "1.46.0"),
    ("https://github.com/apple/swift-nio-ssl.git", "2.37.6"),
    ("https://github.com/apple/swift-nio-transport-services.git", "1.28.0"),
    ("https://github.com/apple/swift-nio.git", "2.101.3"),
    ("https://github.com/apple/swift-numerics.git", "1.1.1"),
    ("https://github.com/apple/swift-service-context.git", "1.5.1"),
    ("https://github.com/apple/swift-system", "1.8.1"),
    ("https://github.com/hummingbird-project/hummingbird.git", "2.28.1"),
    ("https://github.com/hummingbird-project/swift-mustache.git", "2.1.1"),
    ("https://github.com/swift-server/async-http-client.git", "1.37.0"),
    ("https://github.com/swift-server/swift-prometheus.git", "2.4.1"),
    ("https://github.com/swift-server/swift-service-lifecycle.git", "2.13.0"),
]

let dependencies: [Package.Dependency] =
    Context.environment["PUSH_EXACT_DEPENDENCIES"] == "1"
    ? testedVersions.map { .package(url: $0.url, exact: $0.version) }
    : minimumVersions.map { .package(url: $0.url, from: $0.from) }

let package = Package(
    name: "push",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "push-ingest", targets: ["push-ingest"]),
        .executable(name: "push-render", targets: ["push-render"]),
        .executable(name: "push-send", targets: ["push-send"]),
        .executable(name: "push-feedback", targets: ["push-feedback"]),
        .executable(name: "apns-sandbox", targets: ["apns-sandbox"]),
        .executable(name: "push-console", targets: ["push-console"]),
        .executable(name: "pushctl", targets: ["pushctl"]),
        .executable(name: "foundation-bench", targets: ["foundation-bench"]),
        .executable(name: "feedback-bench", targets: ["feedback-bench"]),
        .executable(name: "render-bench", targets: ["render-bench"]),
        .executable(name: "send-bench", targets: ["send-bench"]),
    ],
    dependencies: dependencies,
    targets: [
        // MARK: C libraries (system-library targets; shims for variadic functions and macros)
        .systemLibrary(
            name: "CRabbitMQ",
            pkgConfig: "librabbitmq",
            providers: [.apt(["librabbitmq-dev"])]
        ),
        .systemLibrary(
            name: "CHiredis",
            pkgConfig: "hiredis",
            providers: [.apt(["libhiredis-dev"])]
        ),
        .systemLibrary(
            name: "CNghttp2",
            pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),

        // MARK: Wrapper modules: each owns one C library; nothing above them sees a C type
        .target(
            name: "AMQP",
            dependencies: [
                "CRabbitMQ",
                "IOSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Redis",
            dependencies: [
                "CHiredis",
                "IOSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),

        // Writes a crash note from a signal handler (async-signal-safe C; see CrashRecorder).
        .target(name: "CCrashSignal"),

        // What every I/O thread needs: wake pipe, thread start, monotonic clock, the one backoff rule.
        .target(name: "IOSupport", swiftSettings: swiftSettings),

        // HTTP/2 over TLS for both sides (APNs client, apns-sandbox): the only owner of nghttp2 and OpenSSL.
        .target(
            name: "HTTP2Transport",
            dependencies: ["CNghttp2", "COpenSSL", "IOSupport"],
            swiftSettings: swiftSettings
        ),

        .target(
            name: "APNs",
            dependencies: [
                "HTTP2Transport",
                "IOSupport",
                "PushCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),

        // The APNs-compatible HTTP/2 server (apns-sandbox): TLS + nghttp2 event loops, admin API.
        .target(
            name: "APNsSandbox",
            dependencies: [
                "HTTP2Transport",
                "IOSupport",
                "APNs",
                "PushCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Redis-backed domain stores
        .target(
            name: "TokenRegistry",
            dependencies: ["Redis", "PushCore", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RateLimiting",
            dependencies: ["Redis"],
            swiftSettings: swiftSettings
        ),

        // MARK: Service logic (one library per service; the executable only wires it)
        .target(
            name: "PushIngest",
            dependencies: [
                "TokenRegistry",
                "RateLimiting",
                "PushServiceKit",
                "PushCore",
                "AMQP",
                "Redis",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),

        // push-send: consumes send batches, rate limits, sends over the APNs client, reports outcomes.
        .target(
            name: "PushSend",
            dependencies: [
                "APNs",
                "HTTP2Transport",
                "AMQP",
                "Redis",
                "RateLimiting",
                "PushCore",
                "PushServiceKit",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),

        // push-render: push requests → rendered payloads → send batches.
        .target(
            name: "PushRender",
            dependencies: [
                "AMQP",
                "Redis",
                "PushCore",
                "PushServiceKit",
                "TokenRegistry",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "PushFeedback",
            dependencies: [
                "TokenRegistry",
                "PushServiceKit",
                "PushCore",
                "AMQP",
                "Redis",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),

        // push-console: the operators' web console (reports, compose, dead letters, status, tokens).
        .target(
            name: "PushConsole",
            dependencies: [
                "AMQP",
                "Redis",
                "PushCore",
                "PushServiceKit",
                "TokenRegistry",
                "PushSend",
                "PushRender",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Pure core: the domain, no I/O
        .target(
            name: "PushCore",
            swiftSettings: swiftSettings
        ),

        // MARK: Service kit: configuration, logging, metrics, admin listener, lifecycle
        .target(
            name: "PushServiceKit",
            dependencies: [
                "AMQP",
                "CCrashSignal",
                "IOSupport",
                "Redis",
                "PushCore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Executables: argument parsing and wiring only
        .executableTarget(
            name: "push-ingest", dependencies: serviceDependencies + ["PushIngest", "TokenRegistry", "RateLimiting"], swiftSettings: swiftSettings),
        .executableTarget(name: "push-render", dependencies: serviceDependencies + ["PushRender"], swiftSettings: swiftSettings),
        .executableTarget(name: "push-send", dependencies: serviceDependencies + ["PushSend"], swiftSettings: swiftSettings),
        .executableTarget(
            name: "push-feedback", dependencies: serviceDependencies + ["PushFeedback", "TokenRegistry"], swiftSettings: swiftSettings),
        .executableTarget(name: "push-console", dependencies: serviceDependencies + ["PushConsole", "PushRender"], swiftSettings: swiftSettings),
        .executableTarget(name: "apns-sandbox", dependencies: serviceDependencies + ["APNsSandbox"], swiftSettings: swiftSettings),
        .executableTarget(
            name: "pushctl", dependencies: serviceDependencies + ["APNs", "TokenRegistry", "PushFeedback", "PushSend", "PushConsole"],
            swiftSettings: swiftSettings),

        // MARK: Benchmarks: executables that print figures (not timed tests), each beside its script
        // in Benchmarks/<area>/ (`make bench-<area>`)
        .executableTarget(
            name: "foundation-bench",
            dependencies: serviceDependencies,
            path: "Benchmarks/foundation/foundation-bench",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "send-bench",
            dependencies: serviceDependencies,
            path: "Benchmarks/send/send-bench",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "render-bench",
            dependencies: serviceDependencies + ["TestSupport", "TokenRegistry"],
            path: "Benchmarks/render/render-bench",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "feedback-bench",
            dependencies: serviceDependencies + ["PushFeedback", "TokenRegistry"],
            path: "Benchmarks/feedback/feedback-bench",
            swiftSettings: swiftSettings
        ),

        // MARK: Tests
        // A consumer that crashes on purpose, run by the crash-loop test (PushServiceKitTests).
        .executableTarget(
            name: "crash-test-consumer",
            dependencies: serviceDependencies + [.product(name: "UnixSignals", package: "swift-service-lifecycle")],
            path: "Tests/CrashTestConsumer",
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "PushCoreTests", dependencies: ["PushCore", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(
            name: "PushConsoleTests",
            dependencies: [
                "PushConsole", "PushCore", "PushServiceKit", "PushRender", "PushSend", "PushFeedback", "TokenRegistry", "AMQP", "Redis",
                "TestSupport", .product(name: "Hummingbird", package: "hummingbird"), .product(name: "HummingbirdTesting", package: "hummingbird"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "IOSupportTests", dependencies: ["IOSupport", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "HTTP2TransportTests", dependencies: ["HTTP2Transport"], swiftSettings: swiftSettings),
        .testTarget(
            name: "AMQPTests",
            dependencies: ["AMQP", "PushServiceKit", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RedisTests",
            dependencies: ["Redis", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PushServiceKitTests",
            dependencies: [
                "PushServiceKit",
                "PushCore",
                "TestSupport",
                "Redis",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TokenRegistryTests",
            dependencies: ["TokenRegistry", "RateLimiting", "Redis", "PushCore", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PushIngestTests",
            dependencies: [
                "PushIngest",
                "TokenRegistry",
                "RateLimiting",
                "PushServiceKit",
                "PushCore",
                "AMQP",
                "Redis",
                "TestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PushSendTests",
            dependencies: [
                "PushSend",
                "APNs",
                "RateLimiting",
                "PushServiceKit",
                "PushCore",
                "AMQP",
                "Redis",
                "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PushRenderTests",
            dependencies: [
                "PushRender",
                "APNs",
                "PushCore",
                "PushServiceKit",
                "TokenRegistry",
                "AMQP",
                "Redis",
                "TestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PushFeedbackTests",
            dependencies: [
                "PushFeedback",
                "TokenRegistry",
                "PushServiceKit",
                "PushCore",
                "AMQP",
                "Redis",
                "TestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNsTests",
            dependencies: ["APNs", "HTTP2Transport", "IOSupport", "PushCore", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PushctlTests",
            dependencies: [
                "AMQP", "Redis", "PushCore", "PushServiceKit", "TokenRegistry", "TestSupport",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNsClientTests",
            dependencies: [
                "APNs", "TestSupport", .product(name: "Crypto", package: "swift-crypto"), .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNsSandboxTests",
            dependencies: ["APNsSandbox", "APNs", "PushCore", "TestSupport", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SystemLibraryTests",
            dependencies: ["CRabbitMQ", "CHiredis", "CNghttp2", "COpenSSL"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TestSupportTests",
            dependencies: ["TestSupport", "PushCore", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            swiftSettings: swiftSettings
        ),
        // The test harness: locates the servers `make test` started and starts private ones for restart
        // tests; test loggers, `eventually`, services run for a test's duration, tokens, Redis clean-up.
        .target(
            name: "TestSupport",
            dependencies: [
                "APNs", "AMQP", "Redis", "PushCore", "PushServiceKit", "TokenRegistry",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tests/TestSupport",
            swiftSettings: swiftSettings
        ),
    ]
)

var serviceDependencies: [Target.Dependency] {
    [
        "PushServiceKit",
        "PushCore",
        "AMQP",
        "Redis",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "Metrics", package: "swift-metrics"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
    ]
}

// The libraries the fuzz package (Fuzz/Package.swift, `make fuzz`) links its targets against; a
// package can only use another's targets through its products. Nothing here depends on them.
package.products += ["PushCore", "AMQP", "APNs", "PushServiceKit", "PushIngest", "PushSend"].map { .library(name: $0, targets: [$0]) }
