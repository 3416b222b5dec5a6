import APNs
import ArgumentParser
import Logging
import PushCore
import PushSend
import PushServiceKit

@main
struct PushSendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-send",
        abstract: "Sends batches from push.send to APNs over HTTP/2, with retries and rate limits, and reports every outcome.",
        discussion: """
            Consumes push.send (send batches from push-render) and sends every token over HTTP/2 to APNs (PUSH_APNS_ENDPOINT overrides the apps' endpoints, e.g. apns-sandbox). Delivered notifications are counted into one delivered event per batch on push.events; invalid tokens go to push.feedback; 429/500/503 and lost connections are retried through push.send's delayed-retry tiers; permanent refusals go to push.dead. Rate limits and dedupe marks live in Redis. Serves /healthz, /readyz and /metrics on PUSH_HTTP_PORT (default 9102). SIGTERM or SIGINT stops consuming, lets in-flight batches finish (PUSH_SEND_DRAIN_TIMEOUT_S), returns the rest to the queue and exits 0.

            \(PushConfiguration.environmentHelp)
            \(SendConfiguration.environmentHelp)
            """,
        version: PushVersion.current
    )

    func run() async throws {
        let reader = try await PushConfigurationReader.load()
        let send = try SendConfiguration(reader: reader)
        let (configuration, logger) = try await PushServiceRuntime.configure(
            name: "push-send", defaultHTTPPort: PushConfiguration.DefaultHTTPPort.send)
        reader.warnAboutUnknownKeys(known: PushConfiguration.keys.union(SendConfiguration.keys), logger: logger)
        if let proxy = configuration.apnsProxy {
            let parsed: APNsProxy
            do throws(APNsClientError) {
                parsed = try APNsProxy(url: proxy)
            } catch {
                throw ValidationError("PUSH_APNS_PROXY: \(error.message)")
            }
            logger.info("reaching APNs through the proxy \(parsed)")
        }
        let apps = try configuration.loadAppsFile(requireCredentialFiles: true)
        for warning in apnsEndpointWarnings(apps: apps, endpointOverride: configuration.apnsEndpoint, caFile: configuration.apnsCAFile) {
            logger.warning("\(warning)")
        }
        let runtime = try PushServiceRuntime.bootstrap(
            name: "push-send", configuration: configuration, logger: logger, queues: PushQueues(prefix: send.queuePrefix))
        try await runtime.run(
            services: buildPushSend(ServiceDependencies(runtime), configuration: runtime.configuration, send: send, apps: apps))
    }
}
