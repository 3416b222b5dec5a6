import Foundation

extension RequestReport {
    /// The report as the console's API and `pushctl request --json` give it: `id`, `app`, `state`,
    /// the counts, `failed` by reason and `failed_total`, and the times (ms since 1970, or null).
    public var jsonObject: [String: Any] {
        func time(_ value: Int64?) -> Any { value.map { $0 as Any } ?? NSNull() }
        return [
            "id": id, "app": app, "state": state.rawValue, "targeted": targeted, "skipped": skipped, "batches": batches, "sent": sent,
            "delivered": delivered, "failed": failed, "failed_total": failedTotal, "retried": retried, "deferred": deferred,
            "removed": removed, "queued_at": time(queuedAt), "started_at": time(startedAt), "first_delivery_at": time(firstDeliveryAt),
            "last_delivery_at": time(lastDeliveryAt), "dead_reason": deadReason.map { $0 as Any } ?? NSNull(),
        ]
    }

    /// The JSON object as text (keys sorted).
    public var json: String {
        let data = (try? JSONSerialization.data(withJSONObject: jsonObject, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// The report for a terminal: one `name: value` line per count, failures by reason indented.
    public var text: String {
        var lines = [
            "request:    \(id)",
            "app:        \(app)",
            "state:      \(state.rawValue)" + (deadReason.map { " (\($0))" } ?? ""),
            "targeted:   \(targeted)",
            "skipped:    \(skipped)  (device settings)",
            "batches:    \(batches)",
            "sent:       \(sent)",
            "delivered:  \(delivered)",
            "failed:     \(failedTotal)",
        ]
        for reason in failed.keys.sorted() { lines.append("  \(reason): \(failed[reason]!)") }
        lines += [
            "retried:    \(retried)",
            "deferred:   \(deferred)  (rate limits, paused app)",
            "removed:    \(removed)  (invalid tokens)",
        ]
        for (name, value) in [
            ("queued", queuedAt), ("started", startedAt), ("first delivery", firstDeliveryAt), ("last delivery", lastDeliveryAt),
        ] {
            if let value { lines.append("\(name):\(String(repeating: " ", count: max(1, 11 - name.count)))\(Self.timestamp(value))") }
        }
        return lines.joined(separator: "\n")
    }

    /// `2026-11-27T10:30:00.123Z`.
    public static func timestamp(_ milliseconds: Int64) -> String {
        let clamped = min(max(milliseconds, 0), 253_402_300_799_999)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: Date(timeIntervalSince1970: Double(clamped) / 1000))
    }
}
