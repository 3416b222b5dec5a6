import ArgumentParser
import PushCore
import PushFeedback
import PushServiceKit
import TokenRegistry

@main
struct PushFeedbackCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-feedback",
        abstract: "Removes device tokens APNs reported dead (push.feedback), under the invalid-token timestamp rule; sweeps stale tokens.",
        discussion: """
            Consumes push.feedback: a token reported invalid at time T is removed from the Redis token registry (record, user, topic and app sets) only if it was not registered again after T, and each removal is announced as token.removed on push.events. Malformed events go to push.dead with the reason in x-push-error. With PUSH_FEEDBACK_STALE_DAYS set, also sweeps every app's tokens and removes those not registered again for that many days (reason Stale). Serves /healthz, /readyz and /metrics on PUSH_HTTP_PORT (default 9103). SIGTERM or SIGINT stops consuming, finishes and acknowledges the batches in hand, saves the sweep's position and exits 0.

            \(PushConfiguration.environmentHelp)
            \(FeedbackConfiguration.environmentHelp)
            """,
        version: PushVersion.current
    )

    func run() async throws {
        let (configuration, logger) = try await PushServiceRuntime.configure(
            name: "push-feedback", defaultHTTPPort: PushConfiguration.DefaultHTTPPort.feedback)
        let reader = try await PushConfigurationReader.load()
        reader.warnAboutUnknownKeys(known: PushConfiguration.keys.union(FeedbackConfiguration.keys), logger: logger)
        let feedback = try FeedbackConfiguration(reader: reader)
        let apps = try configuration.loadAppsFile()
        let runtime = try PushServiceRuntime.bootstrap(name: "push-feedback", configuration: configuration, logger: logger)
        try await runtime.run(services: buildPushFeedback(ServiceDependencies(runtime), configuration: feedback, apps: apps))
    }
}
