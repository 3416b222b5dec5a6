public import AMQP
import Foundation
public import PushCore

/// The outcomes of one send batch's tokens, and what must be published before the batch is acked.
///
/// Pure: ``record(_:_:)`` collects one ``TokenOutcome`` per token; ``plan(policy:now:credentialPause:)``
/// turns them into a ``SendBatchPlan``, whose ``SendBatchPlan/messages(queues:)`` are the broker
/// messages. Rules:
/// - delivered (now or earlier) → counted; one `delivered` event for the batch;
/// - invalid token → a ``PushCore/FeedbackEvent`` on `push.feedback`, and `failed.<Reason>`;
/// - retry → a smaller batch (attempt + 1) on the retry tier ``RetryPolicy`` picks (climbing with
///   the attempt, never shorter than the answer's ``RetryWait``); expired →
///   `failed.Expired`; out of attempts → `push.dead` and `failed.<Reason>`;
/// - deferred, or a credential problem (deferred by the app's pause) → a smaller batch (same attempt,
///   one more deferral) on a tier at least as long as the wait; expired or out of deferrals as above;
/// - dropped → `failed.<Reason>`;
/// - permanent → `push.dead` (one message per reason, the batch with just those tokens, the reason in
///   `x-push-error`) and `failed.<Reason>`;
/// - unfinished (shutdown) → the whole batch goes back to the queue; nothing is published.
public struct SendBatchReport: Sendable {
    public let batch: SendBatch
    /// How many times the batch's tokens were deferred before (``SendBatchPlan/deferralsHeader``).
    public let deferrals: Int
    public private(set) var outcomes: [(token: String, outcome: TokenOutcome)] = []

    public init(batch: SendBatch, deferrals: Int) {
        self.batch = batch
        self.deferrals = deferrals
        outcomes.reserveCapacity(batch.tokens.count)
    }

    public mutating func record(_ token: String, _ outcome: TokenOutcome) {
        outcomes.append((token, outcome))
    }

    /// Records the same outcome for every token of the batch.
    public mutating func recordAll(_ outcome: TokenOutcome) {
        for token in batch.tokens { record(token, outcome) }
    }

    /// - Parameters:
    ///   - now: ms since 1970 (`reported_at`, `at`, expiration checks).
    ///   - credentialPause: how long the app's sending pauses after a credential problem.
    public func plan(policy: RetryPolicy, now: Int64, credentialPause: Duration) -> SendBatchPlan {
        var plan = SendBatchPlan(batch: batch, now: now)
        var republish: [RepublishKey: [String]] = [:]
        var dead: [String: (detail: String, tokens: [String])] = [:]

        func fail(_ token: String, _ reason: String) {
            plan.failures[reason, default: []].append(token)
        }
        func deadLetter(_ token: String, _ reason: String, _ detail: String) {
            dead[reason, default: (detail, [])].tokens.append(token)
            fail(token, reason)
        }
        func deferral(_ token: String, reason: String, retryAfter: Duration) {
            switch policy.deferral(retryAfter: retryAfter, deferrals: deferrals, expiration: batch.expiration, now: now) {
            case .republish(let tier):
                republish[RepublishKey(tier: tier, attempt: batch.attempt, deferrals: deferrals + 1, reason: reason), default: []].append(token)
                plan.deferred[reason, default: 0] += 1
            case .expired:
                fail(token, "Expired")
            case .exhausted:
                deadLetter(token, reason, "still not sendable after \(deferrals) deferrals (\(reason))")
            }
        }

        for (token, outcome) in outcomes {
            switch outcome {
            case .delivered:
                plan.delivered += 1
            case .alreadyDelivered:
                plan.alreadyDelivered += 1
            case .invalidToken(let reason, let since):
                plan.feedback.append(
                    FeedbackEvent(app: batch.app, token: token, reason: reason, timestamp: since, reportedAt: now, requestID: batch.requestID))
                fail(token, reason)
            case .retry(let reason, let wait):
                switch policy.afterRetryableFailure(attempt: batch.attempt, wait: wait, expiration: batch.expiration, now: now) {
                case .republish(let tier):
                    republish[RepublishKey(tier: tier, attempt: batch.attempt + 1, deferrals: deferrals, reason: reason), default: []].append(token)
                    plan.retried[reason, default: 0] += 1
                case .expired:
                    fail(token, "Expired")
                case .exhausted:
                    deadLetter(token, reason, "gave up after \(batch.attempt + 1) attempts; last answer \(reason)")
                }
            case .deferred(let reason, let retryAfter):
                deferral(token, reason: reason, retryAfter: retryAfter)
            case .credentialProblem(let reason):
                plan.credentialProblem = plan.credentialProblem ?? reason
                deferral(token, reason: reason, retryAfter: credentialPause)
            case .dropped(let reason):
                fail(token, reason)
            case .permanent(let reason, let detail):
                deadLetter(token, reason, detail)
            case .unfinished:
                plan.isUnfinished = true
            }
        }
        plan.republished = republish.keys.sorted().map { key in
            SendBatchPlan.Republished(
                tier: key.tier, deferrals: key.deferrals, reason: key.reason,
                batch: batch.narrowed(to: republish[key]!, attempt: key.attempt, deferrals: key.deferrals))
        }
        plan.deadLetters = dead.keys.sorted().map { reason in
            let entry = dead[reason]!
            return SendBatchPlan.DeadLetter(
                reason: reason, detail: entry.detail, batch: batch.narrowed(to: entry.tokens, attempt: batch.attempt, deferrals: nil))
        }
        return plan
    }

    private struct RepublishKey: Hashable, Comparable {
        let tier: Int
        let attempt: Int
        let deferrals: Int
        let reason: String

        static func < (lhs: RepublishKey, rhs: RepublishKey) -> Bool {
            (lhs.tier, lhs.attempt, lhs.deferrals, lhs.reason) < (rhs.tier, rhs.attempt, rhs.deferrals, rhs.reason)
        }
    }
}

/// What one batch's outcomes ask for (see ``SendBatchReport``).
public struct SendBatchPlan: Sendable {
    /// Header counting how often a republished batch's tokens were deferred (rate limits, pauses).
    public static let deferralsHeader = "x-push-deferrals"
    /// Header naming why a batch was republished (informational).
    public static let retryReasonHeader = "x-push-retry-reason"

    public struct Republished: Sendable, Equatable {
        public let tier: Int
        public let deferrals: Int
        public let reason: String
        public let batch: SendBatch
    }

    public struct DeadLetter: Sendable, Equatable {
        public let reason: String
        public let detail: String
        public let batch: SendBatch
    }

    public let batch: SendBatch
    public let now: Int64
    public internal(set) var delivered = 0
    public internal(set) var alreadyDelivered = 0
    /// Tokens by reason for the `failed.<Reason>` events (also every dead-lettered token).
    public internal(set) var failures: [String: [String]] = [:]
    public internal(set) var feedback: [FeedbackEvent] = []
    public internal(set) var deadLetters: [DeadLetter] = []
    public internal(set) var republished: [Republished] = []
    /// Tokens republished for another attempt, by reason.
    public internal(set) var retried: [String: Int] = [:]
    /// Tokens deferred, by reason.
    public internal(set) var deferred: [String: Int] = [:]
    /// The first credential problem APNs reported, if any: the app's sending must pause.
    public internal(set) var credentialProblem: String?
    /// Some token got no answer because push-send is stopping: return the whole batch to the queue.
    public internal(set) var isUnfinished = false

    init(batch: SendBatch, now: Int64) {
        self.batch = batch
        self.now = now
    }

    /// The events for `push.events`: one `delivered` (when anything was), one `failed` per reason.
    public var events: [PushEvent] {
        var events: [PushEvent] = []
        if delivered + alreadyDelivered > 0 {
            events.append(
                .delivered(app: batch.app, requestID: batch.requestID, batchID: batch.batchID, count: delivered + alreadyDelivered, at: now))
        }
        for reason in failures.keys.sorted() {
            events.append(
                .failed(app: batch.app, requestID: batch.requestID, batchID: batch.batchID, reason: reason, tokens: failures[reason]!, at: now))
        }
        return events
    }

    /// Every message to publish (with confirms) before the batch is acked: republished batches first
    /// (they carry work), then dead letters, feedback and events.
    ///
    /// Every message carries the AMQP `timestamp` (seconds) of when it is due in its work queue: now,
    /// and for a retry now plus its tier's delay, so `push_queue_message_age_seconds` measures the
    /// time spent waiting in `push.send`, not the planned wait in a tier.
    public func messages(queues: PushQueues) -> [AMQPOutboundMessage] {
        var messages: [AMQPOutboundMessage] = []
        let stamp = UInt64(max(0, now / 1000))
        for retry in republished {
            let delay = queues.send.retryTiers.indices.contains(retry.tier) ? queues.send.retryTiers[retry.tier].components.seconds : 0
            let properties = AMQPProperties(
                headers: [
                    Self.deferralsHeader: .int64(Int64(retry.deferrals)),
                    Self.retryReasonHeader: .string(retry.reason),
                ], timestamp: stamp + UInt64(max(0, delay)))
            // Retry tiers are reached through the default exchange, by queue name.
            messages.append(
                AMQPOutboundMessage(
                    exchange: "", routingKey: queues.send.retryQueue(tier: retry.tier), body: SendJSON.encode(retry.batch), properties: properties)
            )
        }
        for dead in deadLetters {
            let properties = AMQPProperties(headers: [PushQueues.errorHeader: .string("\(dead.reason): \(dead.detail)")], timestamp: stamp)
            messages.append(
                AMQPOutboundMessage(
                    exchange: queues.exchange, routingKey: queues.deadRoutingKey, body: SendJSON.encode(dead.batch), properties: properties))
        }
        for event in feedback {
            messages.append(
                AMQPOutboundMessage(
                    exchange: queues.exchange, routingKey: queues.feedback.routingKey, body: SendJSON.encode(event),
                    properties: AMQPProperties(timestamp: stamp)))
        }
        for event in events {
            messages.append(
                AMQPOutboundMessage(exchange: queues.eventsExchange, routingKey: event.routingKey, body: SendJSON.encode(event), mandatory: false))
        }
        return messages
    }
}

extension SendBatch {
    /// The same notification for `tokens` only, as try `attempt`, with a batch id that says so:
    /// `<original id>#a<attempt>d<deferrals>` (an earlier `#…` suffix is replaced, so ids stay short).
    /// The tokens keep their delivery-mark slots in the original mark set.
    func narrowed(to tokens: [String], attempt: Int, deferrals: Int?) -> SendBatch {
        var copy = self
        let slotOfToken = Dictionary(zip(self.tokens, self.tokens.indices.map(slot(at:))), uniquingKeysWith: { first, _ in first })
        copy.tokens = tokens
        copy.markSet = effectiveMarkSet
        copy.slots = tokens.map { slotOfToken[$0] ?? 0 }
        copy.attempt = attempt
        if let deferrals {
            let base = batchID.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? batchID
            copy.batchID = "\(base)#a\(attempt)d\(deferrals)"
        }
        return copy
    }
}

/// JSON for everything push-send publishes.
enum SendJSON {
    static func encode(_ value: some Encodable) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        // Our message types only hold strings, numbers and arrays: encoding cannot fail.
        return Array(try! encoder.encode(value))
    }
}
