import ArgumentParser
import PushServiceKit

@main
struct PushFeedbackCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-feedback",
        abstract: "Removes device tokens APNs reported dead (push.feedback), under the invalid-token timestamp rule.",
        discussion: """
            Connects to RabbitMQ (declaring the push topology) and Redis, and serves /healthz, /readyz and /metrics on PUSH_HTTP_PORT (default 9103). SIGTERM or SIGINT drains in-flight work and exits 0.

            \(PushConfiguration.environmentHelp)
            """
    )

    func run() async throws {
        let runtime = try await PushServiceRuntime.bootstrap(name: "push-feedback", defaultHTTPPort: 9103)
        try await runtime.run(services: [])
    }
}
