import ArgumentParser
import PushServiceKit

@main
struct PushIngestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-ingest",
        abstract: "Device-token registration: HTTP API, legacy forms and the push.registrations queue, into the Redis token registry.",
        discussion: """
            Connects to RabbitMQ (declaring the push topology) and Redis, and serves /healthz, /readyz and /metrics on PUSH_HTTP_PORT (default 8080). SIGTERM or SIGINT drains in-flight work and exits 0.

            \(PushConfiguration.environmentHelp)
            """
    )

    func run() async throws {
        let runtime = try await PushServiceRuntime.bootstrap(name: "push-ingest", defaultHTTPPort: 8080)
        try await runtime.run(services: [])
    }
}
