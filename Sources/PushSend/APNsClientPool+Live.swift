public import APNs
public import Logging
import Metrics
import PushCore
public import PushServiceKit

extension APNsClient: NotificationSending {}

extension APNsClientPool {
    /// Makes real ``APNs/APNsClient``s: the app's credentials, its environment's endpoint (or
    /// `PUSH_APNS_ENDPOINT`), `PUSH_APNS_CA_FILE`, and push-send's connection count and timeout.
    public static func live(configuration: PushConfiguration, send: SendConfiguration, logger: Logger) -> Factory {
        { app, environment in
            var logger = logger
            logger[metadataKey: "push.app"] = "\(app.bundleID)"
            logger[metadataKey: "push.environment"] = "\(environment.rawValue)"
            var clientConfiguration = try APNsClientConfiguration.forApp(
                app,
                environment: environment,
                endpointOverride: configuration.apnsEndpoint,
                caFile: configuration.apnsCAFile,
                proxy: try configuration.apnsProxy.map { try APNsProxy(url: $0) },
                send: send
            )
            let bundleID = app.bundleID
            clientConfiguration.onGoaway = { goaway in
                // Rare (APNs closes a connection every few hours at most): a handle per GOAWAY is cheap.
                Counter(label: "push_send_apns_goaways_total", dimensions: [("app", bundleID), ("reason", goaway.metricLabel)]).increment()
            }
            return try APNsClient(configuration: clientConfiguration, logger: logger)
        }
    }
}
