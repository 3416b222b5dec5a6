import ArgumentParser
import PushServiceKit

@main
struct PushSendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-send",
        abstract: "Sends batches from push.send to APNs over HTTP/2, with retries and rate limits, and reports every outcome.",
        discussion: """
            Connects to RabbitMQ (declaring the push topology) and Redis, and serves /healthz, /readyz and /metrics on PUSH_HTTP_PORT (default 9102). SIGTERM or SIGINT drains in-flight work and exits 0.

            \(PushConfiguration.environmentHelp)
            """
    )

    func run() async throws {
        let runtime = try await PushServiceRuntime.bootstrap(name: "push-send", defaultHTTPPort: 9102)
        try await runtime.run(services: [])
    }
}
