/// What became of one push request: the answer to "did it go out, and to how many?"
///
/// Assembled from two Redis hashes (``init(id:app:progress:report:)``), both under the app's hash tag:
/// push-render's progress record (state, batches, tokens, skipped, `started_at`) and the report hash
/// the services add to as the request moves (see `RequestReports` in the service kit):
///
/// | field | written by | holds |
/// |---|---|---|
/// | `queued_at` | whoever published it through the console or `pushctl publish` | ms since 1970 |
/// | `dead` | push-render, when it dead-lettered the request | the reason |
/// | `m:<mark set>` | push-send, at every settled batch of that mark set | tokens of the mark set APNs accepted (the most seen) |
/// | `n:<mark set>` | push-send, at a settled batch push-render made | the batch's tokens |
/// | `b:<batch id>#<fingerprint>` | push-send, at every settled batch | that batch's ``BatchTally`` (a redelivered copy overwrites it) |
/// | (the set `…:removed`) | push-feedback | the tokens removed as invalid |
/// | `first`, `last` | push-send | ms of the first and last settled batch that delivered anything |
/// | `t:delivered`, `t:sent`, `t:failed`, `t:retried`, `t:deferred` | push-send | running totals of the fields above, for summaries |
///
/// Counting this way keeps the report exact after crashes and redeliveries: delivered tokens come from
/// the delivery marks (each token of a mark set at most once however often its batch ran), a batch's
/// other outcomes are replaced, not added, when a copy of it settles again, and a removal is a field
/// per token in a set beside the hash.
public struct RequestReport: Sendable, Equatable {
    public enum State: String, Sendable, CaseIterable {
        /// Published; push-render has not taken it yet.
        case queued
        /// push-render is resolving targets and publishing batches.
        case rendering
        /// Every batch is published; some tokens have no final outcome yet (in flight, retrying, deferred).
        case sending
        /// Every token the request reached has a final outcome.
        case done
        /// The request itself was invalid and went to `push.dead`.
        case dead
    }

    public var id: String
    public var app: String
    public var state: State
    /// Devices the target resolved to (sent + skipped).
    public var targeted: Int
    /// Devices whose settings refuse this kind of notification.
    public var skipped: Int
    /// Send batches push-render published.
    public var batches: Int
    /// Tokens push-render handed to push-send: the larger of push-render's count and the tokens of
    /// the batches push-send settled (push-render's can fall short after a Redis restart mid fan-out).
    public var sent: Int
    /// Tokens APNs accepted (each at most once).
    public var delivered: Int
    /// Tokens that ended without delivery, by reason (APNs' reason, `Expired`, or why it was dead-lettered).
    public var failed: [String: Int]
    /// Retries of tokens (a token retried twice counts twice).
    public var retried: Int
    /// Deferrals of tokens by rate limits or a paused app.
    public var deferred: Int
    /// Tokens push-feedback removed from the registry because APNs called them invalid.
    public var removed: Int
    /// ms since 1970.
    public var queuedAt: Int64?
    public var startedAt: Int64?
    public var firstDeliveryAt: Int64?
    public var lastDeliveryAt: Int64?
    public var deadReason: String?

    /// Tokens that ended without delivery (the sum of ``failed``, or a summary's running total).
    public var failedTotal: Int

    /// Builds the report from the two hashes and the number of tokens push-feedback removed (the size
    /// of the report's removal set); nil when none of them exists (unknown id, or expired).
    public init?(id: String, app: String, progress: [String: String], report: [String: String], removedTokens: Int = 0) {
        if progress.isEmpty && report.isEmpty && removedTokens <= 0 { return nil }
        self.id = id
        self.app = app
        batches = Self.count(progress["sequence"])
        skipped = Self.count(progress["skipped"])
        startedAt = progress["started_at"].flatMap { Int64($0) }
        queuedAt = report["queued_at"].flatMap { Int64($0) }
        firstDeliveryAt = report["first"].flatMap { Int64($0) }
        lastDeliveryAt = report["last"].flatMap { Int64($0) }
        deadReason = report["dead"]
        var delivered = 0
        var failed: [String: Int] = [:]
        var retried = 0
        var deferred = 0
        var removed = 0
        var settledTokens = 0
        for (field, value) in report {
            if field.hasPrefix("m:") {
                delivered = Self.sum(delivered, Self.count(value))
            } else if field.hasPrefix("n:") {
                settledTokens = Self.sum(settledTokens, Self.count(value))
            } else if field.hasPrefix("b:") {
                let tally = BatchTally(encoded: value)
                for (reason, count) in tally.failed { failed[reason] = Self.sum(failed[reason] ?? 0, count) }
                retried = Self.sum(retried, tally.retried)
                deferred = Self.sum(deferred, tally.deferred)
            }
        }
        removed = min(max(removedTokens, 0), Self.maximumCount)
        var failedTotal = failed.values.reduce(0, Self.sum)
        // A summary (``RequestReports/summaries``) has the running totals instead of the per-batch fields.
        if !report.keys.contains(where: { $0.hasPrefix("m:") || $0.hasPrefix("b:") || $0.hasPrefix("n:") }) {
            delivered = Self.count(report["t:delivered"])
            settledTokens = Self.count(report["t:sent"])
            failedTotal = Self.count(report["t:failed"])
            retried = Self.count(report["t:retried"])
            deferred = Self.count(report["t:deferred"])
        }
        self.failedTotal = failedTotal
        sent = max(Self.count(progress["tokens"]), settledTokens)
        targeted = sent + skipped
        self.delivered = delivered
        self.failed = failed
        self.retried = retried
        self.deferred = deferred
        self.removed = removed
        state = Self.state(
            progressState: progress["state"], isDead: deadReason != nil, hasProgress: !progress.isEmpty, sent: sent,
            final: Self.sum(delivered, failedTotal))
    }

    /// The state, from what push-render recorded and how many tokens have a final outcome.
    static func state(progressState: String?, isDead: Bool, hasProgress: Bool, sent: Int, final: Int) -> State {
        // A request push-render took after all (the id published again, fixed) is not dead.
        guard hasProgress else { return isDead ? .dead : .queued }
        guard progressState == "done" else { return .rendering }
        return final >= sent ? .done : .sending
    }

    /// The largest count one field may add: far above any real request, low enough that no sum of
    /// fields can overflow.
    static let maximumCount = 1 << 40

    /// A count from Redis; anything not a non-negative integer counts as 0, anything larger than
    /// ``maximumCount`` as that.
    static func count(_ text: String?) -> Int {
        guard let text, let value = Int(text), value >= 0 else { return 0 }
        return min(value, maximumCount)
    }

    /// `a + b`, stopping at ``maximumCount`` (counts from Redis are never trusted to stay small).
    static func sum(_ a: Int, _ b: Int) -> Int { min(min(a, maximumCount) + min(b, maximumCount), maximumCount) }
}

/// The outcomes of one settled send batch other than deliveries, as one report field:
/// `f.<Reason>=<n>;r=<n>;d=<n>` (absent parts are 0). Reasons are APNs' (letters only) or the service
/// kit's dead-letter reasons; `;` and `=` are not allowed in them and are replaced by `_`.
public struct BatchTally: Sendable, Equatable {
    public var failed: [String: Int]
    public var retried: Int
    public var deferred: Int

    public init(failed: [String: Int] = [:], retried: Int = 0, deferred: Int = 0) {
        self.failed = failed
        self.retried = retried
        self.deferred = deferred
    }

    public var encoded: String {
        var parts: [String] = []
        for reason in failed.keys.sorted() where failed[reason]! > 0 {
            let clean = String(reason.map { $0 == ";" || $0 == "=" ? "_" : $0 })
            parts.append("f.\(clean)=\(failed[reason]!)")
        }
        if retried > 0 { parts.append("r=\(retried)") }
        if deferred > 0 { parts.append("d=\(deferred)") }
        return parts.joined(separator: ";")
    }

    /// Reads ``encoded``; unreadable parts are skipped.
    public init(encoded: String) {
        self.init()
        for part in encoded.split(separator: ";") {
            guard let equals = part.lastIndex(of: "="), let parsed = Int(part[part.index(after: equals)...]), parsed >= 0 else { continue }
            let value = min(parsed, RequestReport.maximumCount)
            let name = part[..<equals]
            if name == "r" {
                retried = RequestReport.sum(retried, value)
            } else if name == "d" {
                deferred = RequestReport.sum(deferred, value)
            } else if name.hasPrefix("f."), name.count > 2 {
                failed[String(name.dropFirst(2))] = RequestReport.sum(failed[String(name.dropFirst(2))] ?? 0, value)
            }
        }
    }
}
