import Hummingbird
import Logging
import ServiceLifecycle

/// apns-sandbox, built: the HTTP/2 server, the admin API and the state they share. Run
/// ``services`` in one `ServiceGroup` (the executable does, with SIGTERM/SIGINT as graceful shutdown).
///
/// Build it with ``buildAPNsSandbox(configuration:logger:onAdminRunning:)``; tests call the same
/// builder.
public struct APNsSandbox: Sendable {
    public let state: SandboxState
    public let server: SandboxServer
    public let admin: Application<RouterResponder<BasicRequestContext>>

    /// The admin listener first, so graceful shutdown (in reverse order) stops the HTTP/2 server first
    /// and the admin API still answers while streams drain.
    public var services: [any Service] { [admin, server] }
}

/// Builds apns-sandbox from its configuration: binds the HTTP/2 port (and writes the generated CA
/// to `--ca-out`) at once; the admin port binds when its service runs.
///
/// - Parameters:
///   - configuration: Ports, TLS identity, keys, limits.
///   - logger: The servers' logger.
///   - onAdminRunning: Called with the admin port once it accepts connections.
public func buildAPNsSandbox(
    configuration: SandboxConfiguration,
    logger: Logger,
    onAdminRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
) throws(SandboxError) -> APNsSandbox {
    let state = SandboxState(
        recordLimit: configuration.recordLimit, faultSeed: configuration.faultSeed, trackDuplicates: configuration.trackDuplicates,
        channelLimit: configuration.channelLimit)
    let server = try SandboxServer(configuration: configuration, state: state, logger: logger)
    let router = Router()
    SandboxAdminRoutes(state: state).add(to: router)
    let admin = Application(
        router: router,
        configuration: ApplicationConfiguration(
            address: .hostname(configuration.host, port: configuration.adminPort),
            serverName: nil
        ),
        onServerRunning: { channel in
            await onAdminRunning(channel.localAddress?.port ?? configuration.adminPort)
        },
        logger: logger
    )
    return APNsSandbox(state: state, server: server, admin: admin)
}
