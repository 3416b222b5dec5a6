// swift-tools-version: 6.2
// Fuzz targets for every decoder and decision that sees outside bytes (`make fuzz`,
// scripts/checks/fuzz.sh): one libFuzzer executable each, linking the root package's libraries.
// Built apart from the root package, with the sanitizers on every Swift module:
//
//   swift build -c release --package-path Fuzz --scratch-path .build-fuzz \
//     -Xswiftc -sanitize=fuzzer,address -Xswiftc -enable-testing
//
// (scripts/fuzz.sh does that and runs them). `-enable-testing` lets targets reach the internal
// decoders (`@testable import`) rather than widening their access for the fuzzer's sake.

import PackageDescription

let package = Package(
    name: "push-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "push", path: "..")],
    targets: [
        .target(name: "CLibFuzzer"),
        .target(name: "FuzzSupport", dependencies: ["CLibFuzzer", .product(name: "PushCore", package: "push")]),
        fuzzTarget("fuzz-push-request", ["PushCore"]),
        fuzzTarget("fuzz-send-batch", ["PushCore", "PushSend"]),
        fuzzTarget("fuzz-registration", ["PushCore", "PushIngest"]),
        fuzzTarget("fuzz-invalid-token-report", ["PushCore"]),
        fuzzTarget("fuzz-legacy-forms", ["PushCore", "PushIngest"]),
        fuzzTarget("fuzz-legacy-feedback", ["PushCore"]),
        fuzzTarget("fuzz-apps-file", ["PushCore"]),
        fuzzTarget("fuzz-strings-catalog", ["PushCore"]),
        fuzzTarget("fuzz-amqp-headers", ["PushCore", "AMQP", "PushServiceKit"]),
        fuzzTarget("fuzz-apns-response", ["APNs"]),
    ]
)

/// An executable whose one file defines `LLVMFuzzerTestOneInput`; libFuzzer supplies `main`, so the
/// file is compiled as a library (no top-level code, no `main` of its own).
func fuzzTarget(_ name: String, _ libraries: [String]) -> Target {
    .executableTarget(
        name: name,
        dependencies: ["FuzzSupport"] + libraries.map { .product(name: $0, package: "push") },
        swiftSettings: [.unsafeFlags(["-parse-as-library"])]
    )
}
