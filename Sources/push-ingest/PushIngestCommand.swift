import ArgumentParser
import PushCore
import PushIngest
import PushServiceKit
import RateLimiting
import TokenRegistry

@main
struct PushIngestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-ingest",
        abstract: "Device-token registration: HTTP API, legacy forms and the push.registrations queue, into the Redis token registry.",
        discussion: """
            Serves on PUSH_HTTP_PORT (default 8080): PUT/GET/DELETE /v1/apps/{app}/devices/{token} (Authorization: Bearer <the app's ingest key>), the legacy forms GET/POST /register and POST /push_token, and /healthz, /readyz, /metrics; GET /openapi.yaml is the OpenAPI 3.1 spec of all of it. Consumes push.registrations. Connects to RabbitMQ (declaring the push topology) and Redis; SIGTERM or SIGINT stops accepting requests, finishes those in flight, drains the queue consumer and exits 0.

            \(PushConfiguration.environmentHelp)
            \(IngestConfiguration.environmentHelp)
            """,
        version: PushVersion.current
    )

    func run() async throws {
        let (configuration, logger) = try await PushServiceRuntime.configure(
            name: "push-ingest", defaultHTTPPort: PushConfiguration.DefaultHTTPPort.ingest)
        let reader = try await PushConfigurationReader.load()
        reader.warnAboutUnknownKeys(known: PushConfiguration.keys.union(IngestConfiguration.keys), logger: logger)
        let ingest = try IngestConfiguration(reader: reader)
        let apps = try configuration.loadAppsFile(readIngestSecrets: true)
        let runtime = try PushServiceRuntime.bootstrap(name: "push-ingest", configuration: configuration, logger: logger)
        let services = buildPushIngest(
            ServiceDependencies(runtime), configuration: runtime.configuration, ingest: ingest, apps: apps, readiness: runtime.readinessChecks
        )
        // The HTTP application serves the admin routes itself, unless PUSH_ADMIN_PORT gives them a
        // listener of their own (then the public port serves only the API).
        let admin =
            runtime.configuration.adminPort == nil
            ? nil : buildAdminServer(configuration: runtime.configuration, readiness: runtime.readinessChecks, logger: runtime.logger)
        try await runtime.run(services: services, adminServer: admin)
    }
}
