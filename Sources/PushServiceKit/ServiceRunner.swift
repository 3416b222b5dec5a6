import Logging
import ServiceLifecycle
import UnixSignals

/// The `ServiceGroup` every executable runs: the admin server first (so graceful shutdown, which goes
/// in reverse order, stops it last and `/healthz` answers while work drains), then `services`.
///
/// - SIGTERM and SIGINT start a graceful shutdown: each service finishes its in-flight work.
/// - After `shutdownTimeout` the group cancels whatever still runs.
/// - A service that stops on its own, or fails, shuts the others down gracefully; the group then
///   ends (throwing the failure).
/// - An ``IdleMemoryTrimmer`` runs beside them, so memory a burst of work left behind goes back to
///   the system when the process goes idle.
///
/// - Parameters:
///   - services: The service's long-running parts (consumers, servers, connections).
///   - adminServer: The admin listener, or `nil` when a service serves ``AdminRoutes`` itself.
///   - shutdownTimeout: How long graceful shutdown may take (default 30 s).
///   - gracefulShutdownSignals: The signals that start graceful shutdown; tests pass `[]`.
///   - logger: The group's logger.
public func makeServiceGroup(
    services: [any Service],
    adminServer: AdminServer?,
    shutdownTimeout: Duration = .seconds(30),
    gracefulShutdownSignals: [UnixSignal] = [.sigterm, .sigint],
    logger: Logger
) -> ServiceGroup {
    let all: [any Service] = (adminServer.map { [$0] } ?? []) + services + [IdleMemoryTrimmer()]
    var configuration = ServiceGroupConfiguration(
        services: all.map {
            ServiceGroupConfiguration.ServiceConfiguration(
                service: $0,
                successTerminationBehavior: .gracefullyShutdownGroup,
                failureTerminationBehavior: .gracefullyShutdownGroup
            )
        },
        gracefulShutdownSignals: gracefulShutdownSignals,
        logger: logger
    )
    configuration.maximumGracefulShutdownDuration = shutdownTimeout
    return ServiceGroup(configuration: configuration)
}

/// Runs the executable's services until SIGTERM/SIGINT (see ``makeServiceGroup(services:adminServer:shutdownTimeout:gracefulShutdownSignals:logger:)``).
///
/// Returns once every service has stopped cleanly, so `main` returns and the process exits 0. Throws
/// (after logging it) the error of a service that failed.
public func runService(
    services: [any Service],
    adminServer: AdminServer?,
    shutdownTimeout: Duration = .seconds(30),
    logger: Logger
) async throws {
    let group = makeServiceGroup(
        services: services,
        adminServer: adminServer,
        shutdownTimeout: shutdownTimeout,
        logger: logger
    )
    do {
        try await group.run()
        logger.info("Stopped")
    } catch {
        logger.error("Stopped after a failure", metadata: ["error.message": "\(error)"])
        throw error
    }
}
