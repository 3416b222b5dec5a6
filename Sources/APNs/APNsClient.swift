import Foundation
import HTTP2Transport
import IOSupport
import Logging
import Synchronization

/// An HTTP/2 client for APNs on nghttp2 and OpenSSL: token (ES256 JWT) or certificate auth, several
/// connections to one endpoint, each carrying as many concurrent streams as the server allows.
///
/// ```swift
/// let client = try APNsClient(
///     configuration: APNsClientConfiguration(endpoint: .production, credentials: .token(key)),
///     logger: logger)
/// let response = try await client.send(notification)   // APNs' answer, whatever its status
/// await client.shutdown()
/// ```
///
/// - Requests wait in one bounded queue (``APNsClientConfiguration/maximumPendingRequests``; past it
///   ``send(_:timeout:)`` fails at once with `overloaded`) and every request has a deadline.
/// - Streams APNs never processed (refused, above a GOAWAY's last stream id) are resent on another
///   connection; streams lost in flight fail with the retryable `connectionLost`; nothing is dropped
///   silently.
/// - One provider token serves every connection, replaced after ``APNsClientConfiguration/providerTokenRefreshAge``
///   and once early on `ExpiredProviderToken` (the request is then resent with the new token).
public final class APNsClient: Sendable {
    public let configuration: APNsClientConfiguration
    private let shared: ClientShared
    private let connections: [ClientConnection]

    /// Loads the credentials and CA file (errors name the file and what is wrong with it) and starts
    /// the connections' threads; connections open when the first request arrives.
    public init(configuration: APNsClientConfiguration, logger: Logger) throws(APNsClientError) {
        guard configuration.connections >= 1, configuration.connections <= 64 else {
            throw APNsClientError(.invalidRequest, "connections must be 1–64 (got \(configuration.connections))")
        }
        let refreshAge = Int64(configuration.providerTokenRefreshAge.components.seconds)
        guard (20 * 60...59 * 60).contains(refreshAge) else {
            throw APNsClientError(.invalidRequest, "the provider token refresh age must be 20–59 minutes (got \(refreshAge) s)")
        }
        self.configuration = configuration
        var tokens: ProviderTokenSource?
        var identity: TLSClientIdentity?
        switch configuration.credentials {
        case .token(let key):
            tokens = ProviderTokenSource(key: key, refreshAgeSeconds: refreshAge, clock: configuration.providerTokenClock)
        case .certificate(let clientCertificate):
            switch clientCertificate.source {
            case .pem(let certificateFile, let privateKeyFile):
                identity = .pem(certificateFile: certificateFile, privateKeyFile: privateKeyFile)
            case .pkcs12(let file, let password):
                identity = .pkcs12(file: file, password: password)
            }
        }
        let tls: TLSContext
        do {
            tls = try TLSContext.client(trusting: configuration.caFile, identity: identity)
        } catch {
            throw APNsClientError(.credentials, error.message)
        }
        var logger = logger
        logger[metadataKey: "apns.endpoint"] = "\(configuration.endpoint)"
        let shared = ClientShared(
            configuration: configuration,
            queue: RequestQueue(capacity: configuration.maximumPendingRequests),
            tls: tls,
            tokens: tokens,
            wakeups: try ConnectionWakeups(count: configuration.connections),
            logger: logger
        )
        self.shared = shared
        connections = (0..<configuration.connections).map { ClientConnection(index: $0, shared: shared) }
        for connection in connections { connection.start() }
    }

    deinit {
        // Threads hold only the shared parts; without a shutdown they are told to stop here.
        for request in shared.queue.close() {
            request.complete(.failure(APNsClientError(.shutdown, "the client was released")))
        }
        for slot in shared.wakeups.slots { slot.stopping.store(true, ordering: .releasing) }
        shared.wakeups.wakeAll()
    }

    /// Sends one notification and returns APNs' answer, whatever its status (200, 4xx, 5xx; see
    /// ``APNsResponse/outcome``).
    ///
    /// Throws only when there is no answer: `invalidRequest` (checked before sending, see
    /// ``APNsNotification/validate()``), `overloaded` (queue full), `timeout` (none within `timeout`,
    /// default ``APNsClientConfiguration/requestTimeout``, queueing included), `connectFailed`,
    /// `connectionLost` (APNs may or may not have accepted it), `credentials`, `shutdown`.
    public func send(_ notification: APNsNotification, timeout: Duration? = nil) async throws(APNsClientError) -> APNsResponse {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<APNsResponse, APNsClientError>, Never>) in
            send(notification, timeout: timeout) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Sends one notification and calls `completion` with APNs' answer, or the error that says why
    /// there is none (the same as ``send(_:timeout:)``), exactly once.
    ///
    /// For senders that keep thousands of notifications in flight: no task and no continuation per
    /// notification. `completion` runs on one of the client's connection threads (or the caller's,
    /// when the request fails before it is queued): keep it short and never block in it.
    public func send(
        _ notification: APNsNotification, timeout: Duration? = nil, completion: @escaping @Sendable (Result<APNsResponse, APNsClientError>) -> Void
    ) {
        do {
            try notification.validate()
        } catch {
            completion(.failure(APNsClientError(.invalidRequest, error.description)))
            return
        }
        enqueue(.notification(notification), timeout: timeout, completion: .notification(completion))
    }

    /// Queues a request of any kind (notifications, broadcasts and channel requests share the queue,
    /// its bound and the connections); the completion runs exactly once.
    func enqueue(_ message: PendingRequest.Message, timeout: Duration?, completion: PendingRequest.Completion) {
        let request = PendingRequest(
            message: message,
            deadline: monotonicNanoseconds() + (timeout ?? configuration.requestTimeout).nanoseconds,
            completion: completion
        )
        switch shared.queue.enqueue(request) {
        case .queued:
            shared.wakeups.wakeOne()
        case .full:
            request.complete(.failure(APNsClientError(.overloaded, "\(shared.queue.capacity) notifications are already waiting")))
        case .closed:
            request.complete(.failure(APNsClientError(.shutdown, "the client is shut down")))
        }
    }

    /// Sends one request that is not a device notification and returns the answer as it came.
    func send(_ request: APNsHTTPRequest, timeout: Duration?) async throws(APNsClientError) -> APNsAnswer {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<APNsAnswer, APNsClientError>, Never>) in
            enqueue(.http(request), timeout: timeout, completion: .answer { continuation.resume(returning: $0) })
        }
        return try result.get()
    }

    /// Fails queued requests with `shutdown`, lets in-flight ones finish (at most the request
    /// timeout, capped at 10 s; then they fail with `connectionLost`), closes the connections and
    /// returns once their threads have exited.
    public func shutdown() async {
        for request in shared.queue.close() {
            request.complete(.failure(APNsClientError(.shutdown, "the client is shutting down")))
        }
        for slot in shared.wakeups.slots { slot.stopping.store(true, ordering: .releasing) }
        shared.wakeups.wakeAll()
        for connection in connections { await connection.waitUntilExited() }
    }

    /// Connections with an HTTP/2 session up now.
    public var openConnections: Int { shared.openConnections.load(ordering: .relaxed) }

    /// Connections opened since the client started (reconnects included).
    public var connectionsOpened: Int { shared.connectionsOpened.load(ordering: .relaxed) }

    /// Requests waiting for a stream.
    public var pendingRequests: Int { shared.queue.count }

    /// Provider tokens minted so far (token auth; 0 with certificates).
    public var providerTokensMinted: Int { shared.tokens?.mints ?? 0 }

    /// The `authorization` value requests carry now (token auth), e.g. to check it independently.
    public func currentAuthorization() throws(APNsClientError) -> String? {
        try shared.tokens?.authorization().value
    }
}
