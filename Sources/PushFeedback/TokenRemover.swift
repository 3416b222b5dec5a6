public import AMQP
public import PushCore
public import TokenRegistry

/// Applies the invalid-token rule to a batch of reports and announces what it removed: one Redis
/// pipeline (``TokenRegistry/TokenRegistry/removeIfNotRegistered(_:now:noteLifetime:)``), then one
/// `token.removed` event per removed token on `push.events`, published with confirms.
///
/// Shared by the `push.feedback` consumer, the stale-token sweep and `pushctl feedback import`, so
/// every path removes tokens and announces them the same way.
public struct TokenRemover: Sendable {
    public let registry: TokenRegistry
    public let amqp: AMQPConnection
    public let queues: PushQueues
    /// How long removals are remembered in Redis (see ``FeedbackConfiguration/removalNoteLifetime``).
    public let noteLifetime: Duration
    public let metrics: FeedbackMetrics

    public init(registry: TokenRegistry, amqp: AMQPConnection, queues: PushQueues = .standard, noteLifetime: Duration, metrics: FeedbackMetrics) {
        self.registry = registry
        self.amqp = amqp
        self.queues = queues
        self.noteLifetime = noteLifetime
        self.metrics = metrics
    }

    /// What one report came to.
    public struct Step: Sendable {
        public var outcome: Result<InvalidTokenOutcome, RegistryError>
        /// The `token.removed` event to publish: for a removal, or for an earlier removal that may not
        /// have been announced (when the caller asked for that).
        public var event: PushEvent?
    }

    /// Runs the rule for every report in one pipeline and says which events to publish (it publishes
    /// nothing itself). Counts removed tokens in the metrics.
    ///
    /// - Parameters:
    ///   - now: ms since 1970: the events' `at`, and what removal notes hold.
    ///   - reannounce: whether report `i` may have been applied before (a redelivered message, a
    ///     retried sweep step): then a token already removed by an earlier try is announced again,
    ///     since that try may have stopped before its event was confirmed. Duplicates are allowed on
    ///     `push.events`; lost events are not.
    /// - Throws: ``TokenRegistry/RegistryError`` when the pipeline as a whole failed.
    public func remove(_ reports: [InvalidTokenReport], now: Int64, reannounce: (Int) -> Bool) async throws(RegistryError) -> [Step] {
        let outcomes = try await registry.removeIfNotRegistered(reports, now: now, noteLifetime: noteLifetime)
        var steps: [Step] = []
        steps.reserveCapacity(outcomes.count)
        for (index, outcome) in outcomes.enumerated() {
            let report = reports[index]
            var event: PushEvent?
            switch outcome {
            case .success(.removed):
                metrics.removedToken(reason: report.reason)
                event = .tokenRemoved(app: report.app, token: report.token.hex, reason: report.reason, at: now)
            case .success(.notFound(let earlier?)) where reannounce(index):
                event = .tokenRemoved(app: report.app, token: report.token.hex, reason: earlier.reason, at: earlier.at)
            default:
                break
            }
            steps.append(Step(outcome: outcome, event: event))
        }
        return steps
    }

    /// The message carrying `event` to `push.events` (persistent JSON, not mandatory: nobody may be
    /// listening).
    public func message(for event: PushEvent) -> AMQPOutboundMessage {
        AMQPOutboundMessage(exchange: queues.eventsExchange, routingKey: event.routingKey, body: TokenRemovedJSON.encode(event), mandatory: false)
    }

    /// Counts of what a batch came to.
    public struct Tally: Sendable, Equatable {
        public var removed = 0
        public var kept = 0
        public var notFound = 0
        /// Reports the registry refused for good (a corrupt record), with the first reasons.
        public var refused = 0
        public var refusals: [String] = []

        public init() {}

        public static func += (lhs: inout Tally, rhs: Tally) {
            lhs.removed += rhs.removed
            lhs.kept += rhs.kept
            lhs.notFound += rhs.notFound
            lhs.refused += rhs.refused
            lhs.refusals += rhs.refusals.prefix(Swift.max(0, 10 - lhs.refusals.count))
        }
    }

    /// ``remove(_:now:reannounce:)`` and then publishes the events; returns once every event is
    /// confirmed. For callers without deliveries to settle (the sweep, `pushctl feedback import`).
    ///
    /// - Throws: ``TokenRegistry/RegistryError`` when the Redis pipeline failed or a report failed for
    ///   a reason a retry may fix; the first ``AMQP/AMQPError`` when an event was not confirmed. Either
    ///   way the batch may be repeated (with `reannounce: true`) to finish it.
    public func apply(_ reports: [InvalidTokenReport], now: Int64, reannounce: Bool) async throws -> Tally {
        let steps = try await remove(reports, now: now, reannounce: { _ in reannounce })
        var tally = Tally()
        for step in steps {
            switch step.outcome {
            case .success(.removed): tally.removed += 1
            case .success(.keptRegisteredAfter): tally.kept += 1
            case .success(.notFound): tally.notFound += 1
            case .failure(let error) where error.isRetryable: throw error
            case .failure(let error):
                tally.refused += 1
                if tally.refusals.count < 10 { tally.refusals.append(error.message) }
            }
        }
        let events = steps.compactMap(\.event).map(message(for:))
        for result in await amqp.publish(events) {
            try result.get()
        }
        return tally
    }
}
