import PushCore

/// How to run apns-sandbox: the executable's flags, and what tests set.
public struct SandboxConfiguration: Sendable {
    /// Where the server's TLS certificate comes from.
    public enum ServerIdentity: Sendable, Equatable {
        /// `--tls-cert` (PEM, the chain after the leaf allowed) and `--tls-key` (PEM).
        case files(certificate: String, privateKey: String)
        /// A self-signed CA (EC P-256) made at start, and a server certificate it signs for
        /// `DNS:localhost, IP:127.0.0.1` plus `names` (`--tls-name`); the CA's PEM goes to
        /// `caOutput` (`--ca-out`) when given.
        case generated(caOutput: String?, names: [String] = [])
    }

    /// The default listen address: loopback only.
    public static let defaultHost = "127.0.0.1"

    /// The address both listeners bind, `--host` (`0.0.0.0` in a container other containers reach).
    public var host: String = SandboxConfiguration.defaultHost

    /// HTTP/2 (TLS) port, `--port`; 0 picks a free one.
    public var port: Int
    /// Admin HTTP/1.1 port, `--admin-port`; 0 picks a free one.
    public var adminPort: Int
    /// `--management-port`: channel management gets a TLS listener of its own, as at Apple (where
    /// the push port then answers it 404 `BadPath`, and this one answers notifications and
    /// broadcasts so); nil serves every API on ``port``. 0 picks a free one.
    public var managementPort: Int?
    public var identity: ServerIdentity
    /// `--public-key KEYID=PEM`: key id → public key PEM text. Empty accepts any well-formed ES256 token.
    public var publicKeys: [String: String]
    /// `--key-team KEYID=TEAMID`: key id → the team id it belongs to; a token with that `kid` must
    /// name that team in `iss` (else 403 `InvalidProviderToken`). Keys not named here take any
    /// well-formed team id.
    public var keyTeams: [String: String] = [:]
    /// `--key-environment KEYID=sandbox|production`: a key Apple limits to one environment; its tokens
    /// in the other answer 403 `BadEnvironmentKeyInToken`. Keys not named here serve both.
    public var keyEnvironments: [String: AppConfiguration.Environment] = [:]
    /// `--environment`: which of Apple's environments this server plays, for ``keyEnvironments``.
    public var environment: AppConfiguration.Environment = .sandbox
    /// `--client-ca`: a PEM file of CA certificates whose client certificates are accepted.
    public var clientCAFile: String?
    /// Event-loop threads, each owning its connections.
    public var workerThreads: Int
    /// Deliveries kept for `GET /deliveries`.
    public var recordLimit: Int
    /// Seeds the fault rolls for reproducible runs; nil seeds from the system.
    public var faultSeed: UInt64?
    /// `--track-duplicates`: count distinct deliveries and duplicates exactly in `/stats`.
    public var trackDuplicates: Bool
    /// How long a graceful shutdown waits for in-flight streams before closing connections.
    public var shutdownTimeout: Duration
    /// `--channel-limit`: broadcast channels per bundle id (Apple: 10,000 per app and environment);
    /// past it creation answers 400 `CannotCreateChannelConfig`.
    public var channelLimit: Int
    /// `--strict-priorities`: a priority Apple's pages forbid for the push type (a background push at
    /// 10, a Live Activity at 1) answers 400 `BadPriority`. Off by default: Apple's servers are not
    /// known to refuse them, so the default answers as they are seen to.
    public var strictPriorities = false
    /// `--confirm-answers`: after writing accepted answers, send a PING and count them received only
    /// once the client acknowledges it, so `lost_answers` also covers answers written to a client
    /// killed before it read them. Off by default: APNs is not known to send PINGs.
    public var confirmsAnswers = false
    /// `--idle-timeout-s`: a connection with nothing begun for this long gets a GOAWAY saying
    /// `IdleTimeout`, as APNs closes idle connections; nil (the default) keeps idle connections open.
    public var idleTimeout: Duration?

    public init(
        port: Int = 2197,
        adminPort: Int = 2198,
        identity: ServerIdentity = .generated(caOutput: nil),
        publicKeys: [String: String] = [:],
        clientCAFile: String? = nil,
        workerThreads: Int = 2,
        recordLimit: Int = SandboxState.defaultRecordLimit,
        faultSeed: UInt64? = nil,
        trackDuplicates: Bool = false,
        shutdownTimeout: Duration = .seconds(10),
        channelLimit: Int = ChannelRegistry.defaultLimit
    ) {
        self.port = port
        self.adminPort = adminPort
        self.identity = identity
        self.publicKeys = publicKeys
        self.clientCAFile = clientCAFile
        self.workerThreads = workerThreads
        self.recordLimit = recordLimit
        self.faultSeed = faultSeed
        self.trackDuplicates = trackDuplicates
        self.shutdownTimeout = shutdownTimeout
        self.channelLimit = channelLimit
    }
}
