import APNs
import Foundation

/// A bad admin API request: the field at fault and what is wrong with it. Answered with 400
/// `{"error":"invalid_field","field":…,"message":…}`.
public struct AdminRequestError: Error, Sendable, Equatable, CustomStringConvertible {
    public let field: String
    public let message: String

    public init(field: String, _ message: String) {
        self.field = field
        self.message = message
    }

    public var description: String { "\(field): \(message)" }
}

/// Reads the admin API's JSON bodies and query values, without I/O.
public enum AdminRequest {
    /// `PUT /tokens/{token}`: `{"state":"unregistered","timestamp":<ms>}`, `{"state":"expired",
    /// "timestamp":<ms>}` (410 `ExpiredToken`), `{"state":"bad"}`,
    /// `{"state":"liveactivity"}` (a Live Activity token), or `{"state":"active"}` (nil: forget what
    /// was set).
    public static func tokenState(from body: [UInt8]) throws(AdminRequestError) -> TokenState? {
        let object = try jsonObject(body)
        for key in object.keys where key != "state" && key != "timestamp" {
            throw AdminRequestError(field: key, "unknown field (expected state, timestamp)")
        }
        guard let state = object["state"] as? String else {
            throw AdminRequestError(field: "state", "required: \"unregistered\", \"expired\", \"bad\", \"liveactivity\" or \"active\"")
        }
        switch state {
        case "unregistered", "expired":
            guard let value = object["timestamp"] else {
                throw AdminRequestError(field: "timestamp", "required with state \(state): ms since 1970")
            }
            guard let timestamp = integer(value), timestamp >= 0 else {
                throw AdminRequestError(field: "timestamp", "must be a non-negative integer (ms since 1970)")
            }
            return state == "expired" ? .expired(timestamp: timestamp) : .unregistered(timestamp: timestamp)
        case "bad", "active", "liveactivity":
            if object["timestamp"] != nil {
                throw AdminRequestError(field: "timestamp", "only goes with state unregistered or expired")
            }
            return state == "bad" ? .bad : state == "liveactivity" ? .liveActivity : nil
        default:
            throw AdminRequestError(
                field: "state", "'\(state)' is not \"unregistered\", \"expired\", \"bad\", \"liveactivity\" or \"active\"")
        }
    }

    /// `PUT /faults`: one fault object, merged into `faults`: `{"status":503|429|500,"rate":0…1}`
    /// (rate 0 removes it; `"reason"` chooses among the status's reasons, e.g. 503 `Shutdown`),
    /// `{"goaway_every":N}` (with `"goaway_reason"` for the debug data), `{"delay_ms":D}`,
    /// `{"drop_every":N}` (0 removes each). Several keys in one object are applied together.
    public static func applyFault(from body: [UInt8], to faults: inout SandboxFaults) throws(AdminRequestError) {
        let object = try jsonObject(body)
        let known: Set<String> = [
            "status", "rate", "reason", "goaway_every", "goaway_reason", "delay_ms", "drop_every", "broadcast_feature_not_enabled",
        ]
        for key in object.keys.sorted() where !known.contains(key) {
            throw AdminRequestError(
                field: key, "unknown fault (expected status + rate [+ reason], goaway_every [+ goaway_reason], delay_ms, drop_every)")
        }
        guard !object.isEmpty else {
            throw AdminRequestError(
                field: "body", "names no fault (expected status + rate [+ reason], goaway_every [+ goaway_reason], delay_ms, drop_every)")
        }
        var updated = faults
        if object["status"] != nil || object["rate"] != nil {
            guard let status = object["status"].flatMap(integer), SandboxFaults.injectableStatuses.contains(Int(status)) else {
                throw AdminRequestError(field: "status", "must be 429, 500 or 503")
            }
            guard let rate = number(object["rate"]), (0...1).contains(rate) else {
                throw AdminRequestError(field: "rate", "must be a number from 0 to 1")
            }
            var reason: APNsReason?
            if let value = object["reason"] {
                let allowed = SandboxFaults.reasonsByStatus[Int(status)] ?? []
                guard let text = value as? String, let chosen = allowed.first(where: { $0.rawValue == text }) else {
                    throw AdminRequestError(field: "reason", "must be one of \(allowed.map(\.rawValue).joined(separator: ", ")) for status \(status)")
                }
                reason = chosen
            }
            updated.setRate(rate, forStatus: Int(status), reason: reason)
        } else if object["reason"] != nil {
            throw AdminRequestError(field: "reason", "only goes with status and rate")
        }
        if let value = object["goaway_reason"] {
            if value is NSNull {
                updated.goawayReason = nil
            } else {
                guard let text = value as? String, let reason = SandboxFaults.goawayReasons.first(where: { $0.rawValue == text }) else {
                    throw AdminRequestError(
                        field: "goaway_reason", "must be one of \(SandboxFaults.goawayReasons.map(\.rawValue).joined(separator: ", ")) or null")
                }
                updated.goawayReason = reason
            }
        }
        if let value = object["goaway_every"] {
            updated.goawayEvery = try count(value, field: "goaway_every", maximum: 1 << 30)
        }
        if let value = object["broadcast_feature_not_enabled"] {
            // A JSON boolean: an NSNumber of type "c" (a number such as 1 is not one).
            guard let number = value as? NSNumber, String(cString: number.objCType) == "c" else {
                throw AdminRequestError(field: "broadcast_feature_not_enabled", "must be true or false")
            }
            updated.broadcastFeatureNotEnabled = number.boolValue
        }
        if let value = object["drop_every"] {
            updated.dropEvery = try count(value, field: "drop_every", maximum: 1 << 30)
        }
        if let value = object["delay_ms"] {
            updated.delayMilliseconds = try count(value, field: "delay_ms", maximum: 60_000)
        }
        faults = updated
    }

    /// An optional non-negative integer query value (`since`, `limit`).
    public static func queryInteger(_ text: String?, field: String) throws(AdminRequestError) -> Int64? {
        guard let text else { return nil }
        guard let value = Int64(text), value >= 0 else {
            throw AdminRequestError(field: field, "must be a non-negative integer (got '\(text)')")
        }
        return value
    }

    /// A non-negative integer up to `maximum`; 0 or null means "off" (nil).
    private static func count(_ value: Any, field: String, maximum: Int64) throws(AdminRequestError) -> Int? {
        if value is NSNull { return nil }
        guard let number = integer(value), (0...maximum).contains(number) else {
            throw AdminRequestError(field: field, "must be an integer from 0 (off) to \(maximum)")
        }
        return number == 0 ? nil : Int(number)
    }

    private static func jsonObject(_ body: [UInt8]) throws(AdminRequestError) -> [String: Any] {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
            throw AdminRequestError(field: "body", "must be a JSON object")
        }
        return object
    }

    /// A JSON number (not a boolean).
    private static func number(_ value: Any?) -> Double? {
        // JSONSerialization gives booleans as NSNumbers of type "c" (char); real numbers never are.
        guard let number = value as? NSNumber, String(cString: number.objCType) != "c" else { return nil }
        return number.doubleValue.isFinite ? number.doubleValue : nil
    }

    /// A JSON number with an integral value.
    private static func integer(_ value: Any) -> Int64? {
        guard let double = number(value), double == double.rounded(), abs(double) < 1e15 else { return nil }
        return Int64(double)
    }
}
