import Foundation
import HTTP2Transport

/// A GOAWAY from APNs: the HTTP/2 error code and the reason APNs puts in the frame's debug data, the
/// same `{"reason": …}` JSON as a refusal's body (Apple, "Handling notification responses from APNs":
/// "The JSON data might also be included in a GOAWAY frame when a connection terminates").
///
/// What the connection does next depends on it: a routine close (`Shutdown`, `IdleTimeout`, or
/// `NO_ERROR` without a reason) reconnects when there is work; anything else means this client is
/// doing something APNs refuses (a bad certificate or provider token, too many token updates, a
/// protocol error), so the next connection waits for the backoff, as after a failed connect, instead
/// of becoming the connect/disconnect loop Apple treats as a denial-of-service attack.
public struct APNsGoaway: Sendable, Equatable, CustomStringConvertible {
    /// The HTTP/2 error code (`NO_ERROR` is 0).
    public let errorCode: UInt32
    /// The reason APNs gave, nil when the debug data held none.
    public let reason: APNsReason?

    public init(errorCode: UInt32, reason: APNsReason?) {
        self.errorCode = errorCode
        self.reason = reason
    }

    /// Reads the reason from the frame's debug data: the documented JSON, or else the text itself
    /// (at most 100 characters) so that nothing APNs said is lost.
    public init(errorCode: UInt32, debugData: String) {
        self.errorCode = errorCode
        let trimmed = debugData.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.isEmpty {
            reason = nil
        } else if let object = (try? JSONSerialization.jsonObject(with: Data(trimmed.utf8))) as? [String: Any] {
            reason = (object["reason"] as? String).map(APNsReason.init)
        } else {
            reason = APNsReason(String(trimmed.prefix(100)))
        }
    }

    /// Whether APNs closed because something is wrong, rather than routinely (it is going down, or the
    /// connection was idle): then the next connection waits for the backoff.
    public var isError: Bool {
        if let reason { return reason != .shutdown && reason != .idleTimeout }
        return errorCode != HTTP2ErrorCode.noError
    }

    /// APNs called the provider token expired: the next connection carries a new one.
    public var retiresProviderToken: Bool { reason == .expiredProviderToken }

    /// The reason as a metric label: a documented reason's name, `none` without one, `other` for
    /// anything else (the label's values stay bounded whatever a server sends).
    public var metricLabel: String {
        guard let reason else { return "none" }
        return APNsReason.isDocumented(reason) ? reason.rawValue : "other"
    }

    public var description: String {
        "GOAWAY \(reason.map(\.rawValue) ?? "without a reason") (HTTP/2 error \(errorCode))"
    }
}
