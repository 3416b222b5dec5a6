import APNsSandbox
import ArgumentParser
import Foundation
import Logging
import PushCore
import PushServiceKit

/// The APNs-compatible HTTP/2 server for local runs, tests and benchmarks (CONTRACT.md, "apns-sandbox").
@main
struct APNsSandboxCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-sandbox",
        abstract: "An APNs-compatible HTTP/2 server (TLS, ALPN h2) for local runs, tests and benchmarks.",
        discussion: """
            Answers like APNs (paths, headers, JWT and certificate auth, status codes and reasons), records
            deliveries, and takes fault injection through its admin API on --admin-port:
              GET /deliveries?token=&app=&since=&limit=, DELETE /deliveries,
              PUT /tokens/{token} {"state":"unregistered","timestamp":<ms>} | {"state":"bad"} | {"state":"active"},
              PUT /faults {"status":503,"rate":0.1} | {"goaway_every":N} | {"delay_ms":D} | {"drop_every":N},
              GET /faults, DELETE /faults, GET /stats, GET /healthz.
            A TLS client that offers no ALPN gets HTTP/2 with prior knowledge, as Apple serves it; one that
            offers ALPN without h2 is refused (no_application_protocol).
            Both listeners bind 127.0.0.1. A payload that is not a JSON object is answered 400 PayloadEmpty
            (APNs documents no reason for it). SIGTERM or SIGINT stops accepting, answers the streams in
            flight (GOAWAY) and exits 0.
            Broadcast channels (iOS 18): the channel-management API (POST/GET/DELETE /1/apps/<bundle id>/channels,
            GET /1/apps/<bundle id>/all-channels) and broadcasts (POST /4/broadcasts/apps/<bundle id>) are served on
            --port too, told apart by path (Apple serves management on api-manage-broadcast hosts, ports 2195/2196).
            Admin: GET /channels?app=, DELETE /channels; GET /deliveries?channel= keeps a channel's broadcasts.

            \(PushConfiguration.environmentHelp)
            """,
        version: PushVersion.current
    )

    @Option(help: "HTTP/2 (TLS) port.")
    var port: Int = 2197

    @Option(help: "Address both listeners bind: 127.0.0.1 (loopback only), or 0.0.0.0 in a container others reach.")
    var host: String = SandboxConfiguration.defaultHost

    @Option(help: "A further name (DNS name or IP address) for the generated certificate, e.g. apns-sandbox (repeatable).")
    var tlsName: [String] = []

    @Option(help: "Admin HTTP/1.1 JSON API port.")
    var adminPort: Int = 2198

    @Option(
        help:
            "A TLS port for channel management alone, as Apple's api-manage-broadcast hosts (2195/2196): the HTTP/2 port then answers it 404 BadPath, and this one notifications and broadcasts. Without it the HTTP/2 port answers every API."
    )
    var managementPort: Int?

    @Option(help: "Server certificate (PEM). Without it a self-signed CA and certificate are made.")
    var tlsCert: String?

    @Option(help: "Server private key (PEM), with --tls-cert.")
    var tlsKey: String?

    @Option(help: "Where to write the generated CA certificate, for clients' PUSH_APNS_CA_FILE.")
    var caOut: String?

    @Option(help: "KEYID=PEM: verify JWTs with this kid against this public key (a PEM file, or PEM text; repeatable).")
    var publicKey: [String] = []

    @Option(help: "KEYID=TEAMID: JWTs with this kid must name this team id in iss, as Apple requires of a key's tokens (repeatable).")
    var keyTeam: [String] = []

    @Option(
        help:
            "KEYID=sandbox|production: a key Apple limits to one environment; its tokens here, when this server plays the other (--environment), answer 403 BadEnvironmentKeyInToken (repeatable). Keys not named serve both."
    )
    var keyEnvironment: [String] = []

    @Option(name: .customLong("environment"), help: "The Apple environment this server plays, for --key-environment: sandbox or production.")
    var appleEnvironment: String = AppConfiguration.Environment.sandbox.rawValue

    @Option(help: "CA (PEM) whose client certificates are accepted for certificate auth.")
    var clientCa: String?

    @Option(help: "Deliveries kept for GET /deliveries (the oldest go first; /stats counts stay exact).")
    var recordLimit: Int = 200_000

    @Flag(help: "Remember every accepted token and topic, so GET /stats counts distinct_delivered and duplicates exactly (16 bytes a token).")
    var trackDuplicates = false

    @Option(help: "Event-loop threads.")
    var workers: Int = 2

    @Option(help: "Seed for fault injection's random rolls (reproducible runs).")
    var faultSeed: UInt64?

    @Option(help: "Broadcast channels per bundle id; past it creation answers CannotCreateChannelConfig (Apple: 10,000).")
    var channelLimit: Int = 10_000

    @Flag(help: "Answer 400 BadPriority to a priority Apple's pages forbid for the push type (a background push at 10, a Live Activity at 1).")
    var strictPriorities = false

    @Flag(
        help:
            "Send a PING after accepted answers and count them received only once the client acknowledges it, so GET /stats's lost_answers covers answers written to a client killed before it read them."
    )
    var confirmAnswers = false

    @Option(help: "Seconds a connection may stay idle before a GOAWAY saying IdleTimeout (default: never).")
    var idleTimeoutS: Int?

    func validate() throws {
        for (name, value) in [("--port", port), ("--admin-port", adminPort), ("--management-port", managementPort ?? 1)]
        where !(1...65535).contains(value) {
            throw ValidationError("\(name) \(value) is not a port number (1–65535)")
        }
        if (tlsCert == nil) != (tlsKey == nil) {
            throw ValidationError("--tls-cert and --tls-key go together")
        }
        if tlsCert != nil, caOut != nil {
            throw ValidationError("--ca-out writes the generated CA; with --tls-cert nothing is generated")
        }
        if tlsCert != nil, !tlsName.isEmpty {
            throw ValidationError("--tls-name adds names to the generated certificate; with --tls-cert nothing is generated")
        }
        for name in tlsName
        where name.isEmpty || name.count > 253 || !name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || ".-:".contains($0)) }) {
            throw ValidationError("--tls-name '\(name)' is not a DNS name or IP address")
        }
        for entry in publicKey where !entry.contains("=") {
            throw ValidationError("--public-key '\(entry)' must be KEYID=PEM")
        }
        _ = try Self.keyTeams(keyTeam)
        _ = try Self.keyEnvironments(keyEnvironment)
        _ = try Self.environment(appleEnvironment)
        guard recordLimit >= 1 else { throw ValidationError("--record-limit must be at least 1") }
        guard (1...64).contains(workers) else { throw ValidationError("--workers must be 1–64") }
        guard channelLimit >= 1 else { throw ValidationError("--channel-limit must be at least 1") }
        if let idleTimeoutS, !(1...86_400).contains(idleTimeoutS) { throw ValidationError("--idle-timeout-s must be 1–86400") }
    }

    func run() async throws {
        let environment = try await PushConfiguration.load(defaults: PushConfiguration(httpPort: adminPort))
        PushLogging.bootstrap(environment)
        let logger = {
            var logger = Logger(label: "apns-sandbox")
            logger.logLevel = environment.logLevel
            return logger
        }()

        let sandbox: APNsSandbox
        do {
            var configuration = SandboxConfiguration(
                port: port,
                adminPort: adminPort,
                identity: tlsCert.map { .files(certificate: $0, privateKey: tlsKey ?? "") } ?? .generated(caOutput: caOut, names: tlsName),
                publicKeys: try Self.publicKeys(publicKey),
                clientCAFile: clientCa,
                workerThreads: workers,
                recordLimit: recordLimit,
                faultSeed: faultSeed,
                trackDuplicates: trackDuplicates,
                shutdownTimeout: environment.shutdownTimeout,
                channelLimit: channelLimit
            )
            configuration.host = host
            configuration.keyTeams = try Self.keyTeams(keyTeam)
            configuration.keyEnvironments = try Self.keyEnvironments(keyEnvironment)
            configuration.environment = try Self.environment(appleEnvironment)
            configuration.strictPriorities = strictPriorities
            configuration.confirmsAnswers = confirmAnswers
            configuration.managementPort = managementPort
            configuration.idleTimeout = idleTimeoutS.map { .seconds($0) }
            sandbox = try buildAPNsSandbox(configuration: configuration, logger: logger) { adminPort in
                logger.info("admin API listening", metadata: ["sandbox.admin_port": "\(adminPort)"])
            }
        } catch {
            logger.error("cannot start", metadata: ["error.message": "\(error)"])
            throw ExitCode.failure
        }
        var metadata: Logger.Metadata = [
            "sandbox.port": "\(sandbox.server.port)",
            "sandbox.verified_keys": "\(publicKey.count)",
            "sandbox.client_ca": "\(clientCa ?? "none")",
        ]
        if let caOut { metadata["sandbox.ca_file"] = "\(caOut)" }
        if let management = sandbox.server.managementPort { metadata["sandbox.management_port"] = "\(management)" }
        logger.info("HTTP/2 listening", metadata: metadata)
        try await runService(services: sandbox.services, adminServer: nil, shutdownTimeout: environment.shutdownTimeout, logger: logger)
    }

    /// `KEYID=TEAMID` entries → key id → team id, both 10 letters or digits as Apple issues them.
    static func keyTeams(_ entries: [String]) throws -> [String: String] {
        var teams: [String: String] = [:]
        for entry in entries {
            let parts = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 2, ProviderTokenClaims.isAppleIdentifier(parts[0]), ProviderTokenClaims.isAppleIdentifier(parts[1]) else {
                throw ValidationError("--key-team '\(entry)' must be KEYID=TEAMID, each 10 letters or digits")
            }
            guard teams[parts[0]] == nil || teams[parts[0]] == parts[1] else {
                throw ValidationError("--key-team gives key \(parts[0]) two teams; a key belongs to one team")
            }
            teams[parts[0]] = parts[1]
        }
        return teams
    }

    /// `KEYID=sandbox|production` entries → key id → the one environment the key serves.
    static func keyEnvironments(_ entries: [String]) throws -> [String: AppConfiguration.Environment] {
        var environments: [String: AppConfiguration.Environment] = [:]
        for entry in entries {
            let parts = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 2, ProviderTokenClaims.isAppleIdentifier(parts[0]),
                let environment = AppConfiguration.Environment(rawValue: parts[1].lowercased())
            else {
                throw ValidationError("--key-environment '\(entry)' must be KEYID=sandbox or KEYID=production, the key id 10 letters or digits")
            }
            guard environments[parts[0]] == nil || environments[parts[0]] == environment else {
                throw ValidationError("--key-environment gives key \(parts[0]) two environments; leave it out to serve both")
            }
            environments[parts[0]] = environment
        }
        return environments
    }

    static func environment(_ text: String) throws -> AppConfiguration.Environment {
        guard let environment = AppConfiguration.Environment(rawValue: text.lowercased()) else {
            throw ValidationError("--environment '\(text)' must be sandbox or production")
        }
        return environment
    }

    /// `KEYID=PEM` entries → key id → PEM text (the value is a file path unless it is PEM itself).
    static func publicKeys(_ entries: [String]) throws -> [String: String] {
        var keys: [String: String] = [:]
        for entry in entries {
            let keyID = String(entry.prefix(while: { $0 != "=" }))
            let value = String(entry.dropFirst(keyID.count + 1))
            guard !keyID.isEmpty, !value.isEmpty else { throw ValidationError("--public-key '\(entry)' must be KEYID=PEM") }
            if value.contains("-----BEGIN") {
                keys[keyID] = value
            } else {
                guard let pem = try? String(contentsOfFile: value, encoding: .utf8) else {
                    throw ValidationError("--public-key \(keyID): cannot read the PEM file '\(value)'")
                }
                keys[keyID] = pem
            }
        }
        return keys
    }
}
