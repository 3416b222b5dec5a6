import Foundation
import Hummingbird
import HummingbirdTesting
import PushIngest
import PushServiceKit
import RateLimiting
import TestSupport
import Testing

/// `openapi.yaml` (the repository's OpenAPI document of push-ingest) and `GET /openapi.yaml`:
/// the embedded copy cannot drift from the file, it is served as it is, and every operation it lists
/// is a route. `scripts/checks/openapi.sh` checks the rest against the running binary (lint,
/// schemathesis).
@Suite struct OpenAPISpecTests {
    /// `openapi.yaml` at the package root, found from this file's path.
    static let specURL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // PushIngestTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()
        .appendingPathComponent("openapi.yaml")

    static func repositorySpec() throws -> [UInt8] {
        Array(try Data(contentsOf: specURL))
    }

    @Test func theEmbeddedDocumentIsTheRepositoryFile() throws {
        let file = try Self.repositorySpec()
        let embedded = Array(OpenAPISpec.yaml.utf8)
        if file != embedded {
            let firstDifference = zip(file, embedded).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(file.count, embedded.count)
            Issue.record(
                """
                Sources/PushIngest/OpenAPISpec.swift differs from openapi.yaml (\(embedded.count) vs \(file.count) bytes, first \
                difference at byte \(firstDifference)): run `bash scripts/openapi-embed.sh`
                """)
        }
    }

    @Test func getOpenAPIYAMLServesTheDocumentAsApplicationYAML() async throws {
        let harness = try await HTTPIngestHarness.make()
        let file = try Self.repositorySpec()
        try await harness.run { client async throws in
            let response = try await client.get("/openapi.yaml")
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "application/yaml")
            #expect(Array(response.body.readableBytesView) == file)
        }
        await harness.cleanUp()
    }

    /// With `PUSH_ADMIN_PORT` the admin routes leave the public port; the document stays.
    @Test func theDocumentStaysOnThePublicPortWhenTheAdminRoutesMove() async throws {
        let harness = try await HTTPIngestHarness.make()
        var configuration = PushConfiguration(httpPort: 0, httpHost: "127.0.0.1")
        configuration.adminPort = 1
        let application = buildIngestApplication(
            configuration: configuration, ingest: harness.ingest, apps: harness.apps, registry: harness.registry,
            rateLimiter: RateLimiter(redis: harness.redis), logger: HTTPIngestHarness.logger)
        try await application.test(.live) { client in
            let spec = try await client.execute(uri: "/openapi.yaml", method: .get)
            #expect(spec.status == .ok)
            #expect(spec.headers[.contentType] == "application/yaml")
            let health = try await client.execute(uri: "/healthz", method: .get)
            #expect(health.status == .notFound)
        }
        await harness.cleanUp()
    }

    /// Each `paths` entry and method of the document, from its text: two-space-indented `/…:` keys
    /// under `paths:`, four-space-indented method keys under them.
    static func documentedOperations(_ text: String) -> [(method: String, path: String)] {
        var operations: [(String, String)] = []
        var inPaths = false
        var path: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if !line.hasPrefix(" ") && !line.isEmpty {
                inPaths = line == "paths:"
                path = nil
                continue
            }
            guard inPaths else { continue }
            if line.hasPrefix("  /"), line.hasSuffix(":"), !line.hasPrefix("   ") {
                path = String(line.dropFirst(2).dropLast())
            } else if let path, line.hasPrefix("    "), !line.hasPrefix("     "), line.hasSuffix(":") {
                let key = line.dropFirst(4).dropLast()
                if ["get", "put", "post", "delete", "patch", "head", "options"].contains(key) {
                    operations.append((key.uppercased(), path))
                }
            }
        }
        return operations
    }

    @Test func everyDocumentedOperationIsARoute() async throws {
        let operations = Self.documentedOperations(OpenAPISpec.yaml)
        #expect(operations.count == 16)
        let harness = try await HTTPIngestHarness.make()
        let token = TestTokens.random()
        let values = ["app": HTTPIngestHarness.game, "token": token, "attributes_type": "MatchAttributes", "activity_id": "match-1"]
        try await harness.run { client async throws in
            for (method, template) in operations {
                var path = template
                for (name, value) in values {
                    path = path.replacingOccurrences(of: "{\(name)}", with: value)
                }
                let response = try await client.client.execute(
                    uri: path, method: HTTPRequest.Method(method)!,
                    headers: [.authorization: "Bearer \(HTTPIngestHarness.gameKeys[0])", .contentType: "application/json"],
                    body: method == "PUT" ? ByteBuffer(string: #"{"push_token":"\#(token)"}"#) : nil)
                let unrouted = response.status == .notFound && response.text.hasPrefix(#"{"error":"not_found","message":"no route for"#)
                #expect(!unrouted, "\(method) \(template) is documented but not routed: \(response.text.prefix(200))")
            }
        }
        await harness.cleanUp()
    }
}
