import ArgumentParser
import Logging
import PushConsole
import PushCore
import PushRender
import PushServiceKit

@main
struct PushConsoleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-console",
        abstract:
            "The operators' web console: compose and send pushes, follow their delivery reports, replay dead letters, see queues and credentials, look up and remove tokens.",
        discussion: """
            Serves on PUSH_HTTP_PORT (default 8090): the pages, the JSON API under /api/v1 (a login session or Authorization: Bearer <API key>), and /healthz, /readyz, /metrics. Meant for the operators' network only: it has no public side. Every action is logged with the operator who did it. Needs PUSH_CONSOLE_OPERATORS_FILE (there is no default password).

            \(PushConfiguration.environmentHelp)
            \(ConsoleConfiguration.environmentHelp)
            """,
        version: PushVersion.current
    )

    func run() async throws {
        let (configuration, logger) = try await PushServiceRuntime.configure(
            name: "push-console", defaultHTTPPort: ConsoleConfiguration.defaultHTTPPort)
        let reader = try await PushConfigurationReader.load()
        reader.warnAboutUnknownKeys(known: PushConfiguration.keys.union(ConsoleConfiguration.keys), logger: logger)
        let console = try ConsoleConfiguration(reader: reader)
        let credentials: OperatorCredentials
        do {
            credentials = try OperatorCredentials.load(path: console.operatorsFile)
        } catch {
            throw ValidationError("PUSH_CONSOLE_OPERATORS_FILE: \(error)")
        }
        let sessionKeys = try console.sessionKeys()
        if sessionKeys.isEphemeral {
            logger.warning(
                "no PUSH_CONSOLE_SESSION_KEYS_FILE: sessions are signed with a key made at start, so logins end when the console restarts and replicas do not share them"
            )
        }
        let apps = try configuration.loadAppsFile()
        do {
            try credentials.check(apps: Set(apps.bundleIDs))
        } catch {
            throw ValidationError("PUSH_CONSOLE_OPERATORS_FILE: \(error)")
        }
        for warning in credentials.warnings { logger.warning("operators file: \(warning)") }
        let catalogs = try LocalizationCatalogs.load(directory: configuration.localizationDir)
        let runtime = try PushServiceRuntime.bootstrap(name: "push-console", configuration: configuration, logger: logger)
        let services = try buildPushConsole(
            ServiceDependencies(runtime), configuration: runtime.configuration, console: console, credentials: credentials, sessionKeys: sessionKeys,
            apps: apps,
            catalogs: catalogs, readiness: runtime.readinessChecks)
        runtime.logger.info(
            "push-console ready", metadata: ["push.operators": "\(credentials.operators.count)", "push.api_keys": "\(credentials.apiKeys.count)"])
        try await runtime.run(services: services, adminServer: nil)
    }
}
