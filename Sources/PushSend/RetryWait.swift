public import APNs

/// How soon a notification that got a retryable answer may be tried again, by what APNs said.
///
/// Apple's "Handling notification responses from APNs": a notification answered with a 5xx may be
/// retried after 15 minutes; `TooManyRequests` may be retried with a delay. Nothing was wrong with
/// a notification whose connection went away, so that one goes again at once on another:
///
/// | answer | wait |
/// |---|---|
/// | no answer (connect failed, connection lost, timeout), 503 `Shutdown`, `IdleTimeout` | ``prompt``: the tiers from 1 s |
/// | 429 `TooManyRequests`, `TooManyProviderTokenUpdates` | ``backOff``: from the 30 s tier |
/// | 500 `InternalServerError`, 503 `ServiceUnavailable`, any other 5xx | ``serverError``: `PUSH_SEND_SERVER_ERROR_RETRY_S` (15 min) |
///
/// ``RetryPolicy`` turns the class into the shortest tier a retry may take.
public enum RetryWait: String, Sendable, Hashable, CaseIterable {
    case prompt
    case backOff
    case serverError

    /// The class of a retryable APNs answer (`status` with its `reason`, if any).
    public init(status: Int, reason: APNsReason?) {
        switch (status, reason?.canonical) {
        case (_, .shutdown?), (_, .idleTimeout?):
            self = .prompt
        case (429, _), (_, .tooManyRequests?), (_, .tooManyProviderTokenUpdates?):
            self = .backOff
        case (500...599, _):
            self = .serverError
        default:
            self = .prompt
        }
    }
}
