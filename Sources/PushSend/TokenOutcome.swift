public import APNs

/// What became of one token of a send batch: exactly one of these per token.
///
/// `reason` strings are APNs' reasons (`Unregistered`, `TooManyRequests`, …) or push-send's own
/// (`ConnectionLost`, `Expired`, `RateLimited`, …); they become the `failed.<Reason>` routing keys.
public enum TokenOutcome: Sendable, Equatable {
    /// APNs accepted it now.
    case delivered
    /// APNs accepted it in an earlier try of the same request (the dedupe mark in Redis); not sent again.
    case alreadyDelivered
    /// The token is dead or not this app's (410, `BadDeviceToken`, `DeviceTokenNotForTopic`).
    /// `since` is APNs' 410 timestamp (ms).
    case invalidToken(reason: String, since: Int64?)
    /// Worth another try later: 429, 5xx, a lost connection, a timeout; `wait` says how soon.
    case retry(reason: String, wait: RetryWait = .prompt)
    /// Not sent yet and to be tried after `retryAfter` without counting as an attempt: a rate limit,
    /// or the app's sending is paused.
    case deferred(reason: String, retryAfter: Duration)
    /// Dropped on purpose and reported: expired, or a priority-1 notification the app lets go when limited.
    case dropped(reason: String)
    /// The notification itself is wrong; retrying cannot help. `detail` explains it for `x-push-error`.
    case permanent(reason: String, detail: String)
    /// APNs refused the app's credentials (403), or they cannot be used at all.
    case credentialProblem(reason: String)
    /// Not answered because push-send is shutting down: the batch goes back to the queue.
    case unfinished

    /// Classifies APNs' answer.
    public init(response: APNsResponse) {
        let reason = response.reason?.rawValue ?? Self.statusName(response.status)
        switch response.outcome {
        case .delivered:
            self = .delivered
        case .invalidToken(let since):
            self = .invalidToken(reason: reason, since: since)
        case .retry:
            self = .retry(reason: reason, wait: RetryWait(status: response.status, reason: response.reason))
        case .credentialProblem:
            self = .credentialProblem(reason: reason)
        case .permanentFailure:
            self = .permanent(reason: reason, detail: "APNs refused the notification: \(response.status) \(reason)")
        }
    }

    /// Classifies a send that got no answer.
    public init(error: APNsClientError) {
        switch error.code {
        case .shutdown:
            self = .unfinished
        case .credentials:
            self = .credentialProblem(reason: "InvalidCredentials")
        case .invalidRequest:
            self = .permanent(reason: "InvalidRequest", detail: "not sent: \(error.message)")
        case .connectFailed:
            self = .retry(reason: "ConnectFailed")
        case .connectionLost:
            self = .retry(reason: "ConnectionLost")
        case .timeout:
            self = .retry(reason: "Timeout")
        case .overloaded:
            self = .retry(reason: "Overloaded")
        case .protocolError:
            self = .retry(reason: "ProtocolError")
        }
    }

    /// Whether APNs may have accepted a notification whose send failed this way: it was on the wire
    /// when the connection died or the time ran out. (Not for a refused connect or a full queue.)
    public static func mayHaveBeenAccepted(_ error: APNsClientError) -> Bool {
        switch error.code {
        case .connectionLost, .timeout, .protocolError: true
        default: false
        }
    }

    /// A name for a refusal that came without a `reason`.
    static func statusName(_ status: Int) -> String {
        switch status {
        case 400: "BadRequest"
        case 403: "Forbidden"
        case 404: "NotFound"
        case 405: "MethodNotAllowed"
        case 410: "Unregistered"
        case 413: "PayloadTooLarge"
        case 429: "TooManyRequests"
        case 500: "InternalServerError"
        case 503: "ServiceUnavailable"
        default: "HTTP\(status)"
        }
    }
}
