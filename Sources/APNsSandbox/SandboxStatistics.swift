/// Exact counts since start (or the last `DELETE /deliveries`, which keeps them): `GET /stats`.
public struct SandboxStatistics: Sendable, Equatable {
    /// Requests answered (or dropped) on HTTP/2 streams.
    public var requests = 0
    /// Answers by HTTP status.
    public var byStatus: [Int: Int] = [:]
    /// Refusals by APNs reason.
    public var byReason: [String: Int] = [:]
    /// Deliveries currently kept for `GET /deliveries` (at most the recording limit).
    public var recorded = 0
    /// TLS connections accepted.
    public var connections = 0
    /// GOAWAY frames sent by the `goaway_every` fault.
    public var goaways = 0
    /// Connections reset by the `drop_every` fault.
    public var droppedConnections = 0
    /// Connections that ended without a goodbye while open: reset or closed by a client that sent no
    /// GOAWAY (a killed client), dropped by `drop_every`, or closed after a protocol error.
    public var abortedConnections = 0
    /// Accepted notifications whose answers the client may never have had: on aborted connections,
    /// those not yet written (or, with `--confirm-answers`, not yet acknowledged by a PING sent after
    /// them), and those whose stream the client reset before the answer went. Each may come back as
    /// a duplicate when the client retries: the honest duplicate bound of a fault run.
    public var lostAnswers = 0
    /// With duplicate tracking on (`--track-duplicates`): distinct (topic, token) pairs accepted, and
    /// acceptances of a pair accepted before. Nil when tracking is off.
    public var distinctDelivered: Int?
    public var duplicates: Int?
    /// Channel-management requests (create, read, delete, list) answered, by status and by refusal
    /// reason; apart from the notification and broadcast counts above.
    public var channelRequests = 0
    public var channelByStatus: [Int: Int] = [:]
    public var channelByReason: [String: Int] = [:]

    public init() {}

    /// Accepted notifications (status 200).
    public var delivered: Int { byStatus[200] ?? 0 }
}
