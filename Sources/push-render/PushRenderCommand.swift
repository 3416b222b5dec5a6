import ArgumentParser
import Logging
import PushCore
import PushRender
import PushServiceKit

@main
struct PushRenderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-render",
        abstract: "Turns push requests from push.requests into APNs payloads and publishes send batches to push.send.",
        discussion: """
            Consumes push.requests (CONTRACT.md, "Push request v1"): resolves each request's target to device tokens in the Redis registry, renders the payload per device kind (settings, server-side localisation from PUSH_LOCALIZATION_DIR/<locale>.strings, size), and publishes send batches to push.send with confirms; invalid requests go to push.dead with the reason in x-push-error. Serves /healthz, /readyz and /metrics on PUSH_HTTP_PORT (default 9101). SIGTERM or SIGINT stops consuming, lets in-flight requests reach a confirmed round (they resume from there when redelivered) and exits 0.

            \(PushConfiguration.environmentHelp)
            \(RenderConfiguration.environmentHelp)
            """,
        version: PushVersion.current
    )

    func run() async throws {
        let (configuration, logger) = try await PushServiceRuntime.configure(
            name: "push-render", defaultHTTPPort: PushConfiguration.DefaultHTTPPort.render)
        let reader = try await PushConfigurationReader.load()
        reader.warnAboutUnknownKeys(known: PushConfiguration.keys.union(RenderConfiguration.keys), logger: logger)
        let render = try RenderConfiguration(reader: reader)
        let apps = try configuration.loadAppsFile()
        let catalogs = try LocalizationCatalogs.load(directory: configuration.localizationDir, defaultLocale: render.defaultLocale)
        if catalogs.catalogs.isEmpty {
            logger.warning(
                "no localisation catalogs; localize \"server\" leaves every key to the device",
                metadata: ["push.localization_dir": "\(configuration.localizationDir)"])
        }
        let runtime = try PushServiceRuntime.bootstrap(name: "push-render", configuration: configuration, logger: logger)
        try await runtime.run(services: buildPushRender(ServiceDependencies(runtime), configuration: render, apps: apps, catalogs: catalogs))
    }
}
