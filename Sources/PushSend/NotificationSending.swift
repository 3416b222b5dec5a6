public import APNs

/// What the batch processor needs from an APNs client: one notification in, APNs' answer out.
///
/// ``APNs/APNsClient`` is the implementation; the seam keeps the processor's logic readable apart from
/// HTTP/2 and lets ``APNsClientPool`` hold one client per app and environment.
public protocol NotificationSending: Sendable {
    /// APNs' answer whatever its status; throws only when there is none (transport, shutdown, bad
    /// request or credentials).
    func send(_ notification: APNsNotification, timeout: Duration?) async throws(APNsClientError) -> APNsResponse
    /// The same, answering through `completion` (exactly once, on a client thread: keep it short).
    func send(_ notification: APNsNotification, timeout: Duration?, completion: @escaping @Sendable (Result<APNsResponse, APNsClientError>) -> Void)
    /// One broadcast on a channel: APNs' answer whatever its status; throws only when there is none.
    func send(_ broadcast: APNsBroadcast, timeout: Duration?) async throws(APNsClientError) -> APNsBroadcastResponse
    /// Fails queued requests with `.shutdown`, lets in-flight ones finish (bounded), closes connections.
    func shutdown() async
    /// Connections open now.
    var openConnections: Int { get }
}
