// swift-tools-version: 6.2
// An APNs sender on AsyncHTTPClient that does per notification what APNSwift 6 does (APNSwift itself
// is not in the local package mirror): one HTTPClient per client (one HTTP/2 connection), a JSONEncoder
// payload per request, the ES256 provider token from an actor cache, `.distantFuture` deadlines.
// Kept apart from the main package so the provider does not depend on AsyncHTTPClient.
// Run through Benchmarks/apns-compare/run.sh (`make bench-apns`).

import PackageDescription

let package = Package(
    name: "ahc-bench",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/swift-server/async-http-client.git", exact: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
    ],
    targets: [
        .executableTarget(
            name: "ahc-bench",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
            ]
        )
    ]
)
