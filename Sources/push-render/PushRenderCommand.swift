import ArgumentParser
import PushServiceKit

@main
struct PushRenderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-render",
        abstract: "Turns push requests from push.requests into APNs payloads and publishes send batches to push.send.",
        discussion: """
            Connects to RabbitMQ (declaring the push topology) and Redis, and serves /healthz, /readyz and /metrics on PUSH_HTTP_PORT (default 9101). SIGTERM or SIGINT drains in-flight work and exits 0.

            \(PushConfiguration.environmentHelp)
            """
    )

    func run() async throws {
        let runtime = try await PushServiceRuntime.bootstrap(name: "push-render", defaultHTTPPort: 9101)
        try await runtime.run(services: [])
    }
}
