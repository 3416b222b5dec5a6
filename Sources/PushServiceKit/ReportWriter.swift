import IOSupport
public import Logging
public import PushCore
import Redis
import Synchronization

/// Writes a service's report updates (``RequestReports``) so that Redis trouble does not lose them.
///
/// Every update is idempotent (a mark set's count is kept when larger, a batch's tally replaces its
/// earlier one, a removal is a field per token), which allows two things:
/// - **Retry.** An update whose write failed is kept, in order, and written again (with backoff)
///   until Redis takes it; the caller goes on (reports never hold up delivery). At most
///   ``maximumPending`` wait; beyond that the oldest are dropped, with a warning.
/// - **Replay.** Redis with `appendfsync everysec` may lose the last second of writes it confirmed
///   when it is killed. Updates written in the last ``replayWindow`` are kept, and once a write fails
///   (the sign of Redis trouble) they are written again in front of the waiting ones.
/// - **Echo.** A Redis Cluster master that fails over loses what it confirmed but had not yet
///   replicated, and nothing of this process need fail to notice. So every update is written once
///   more ``echoDelay`` (12 s) after its first write (later than a failover takes): one more small write a
///   batch, and a lost update comes back.
///
/// Lost only when Redis is down or loses data *and* this process dies before Redis is back.
public final class ReportWriter: Sendable {
    public enum Update: Sendable {
        case settled(app: String, batch: RequestReports.SettledBatch)
        case removed(app: String, requestID: String, token: String)
    }

    private struct Written {
        let at: ContinuousClock.Instant
        let update: Update
    }

    private struct State {
        var pending: [Update] = []
        var recent: [Written] = []
        /// Updates to write once more, in the order of their first write (``echoDelay`` after it).
        var echoes: [Written] = []
        var isEchoing = false
        var isFlushing = false
        var replay = false
        var dropped = 0
    }

    public static let maximumPending = 100_000
    public static let replayWindow: Duration = .seconds(5)
    /// How long after its first write an update is written again, by default.
    public static let defaultEchoDelay: Duration = .seconds(12)

    private let reports: RequestReports
    private let logger: Logger
    private let state = Mutex(State())

    /// How long after its first write an update is written again.
    public let echoDelay: Duration

    public init(reports: RequestReports, logger: Logger, echoDelay: Duration = ReportWriter.defaultEchoDelay) {
        self.reports = reports
        self.logger = logger
        self.echoDelay = echoDelay
    }

    /// Writes `updates` now; when that fails they wait for Redis in the background. Returns once
    /// written or queued (never throws).
    public func write(_ updates: [Update]) async {
        await write(updates, echo: true)
    }

    private func write(_ updates: [Update], echo: Bool) async {
        guard !updates.isEmpty else { return }
        let queued = state.withLock { state -> Bool in
            guard state.isFlushing || !state.pending.isEmpty || state.replay else { return false }
            enqueue(updates, into: &state)
            return true
        }
        if queued { return }
        do {
            try await send(updates)
            logger.debug(
                "wrote delivery-report updates",
                metadata: ["push.updates": "\(updates.count)", "push.echo": "\(!echo)", "push.removed": "\(Self.removedTokens(updates))"])
            remember(updates, echo: echo)
        } catch {
            logger.warning(
                "could not write delivery-report updates; they wait for Redis",
                metadata: ["push.error": "\(error)", "push.updates": "\(updates.count)"])
            let start = state.withLock { state -> Bool in
                enqueue(updates, into: &state)
                state.replay = true
                let start = !state.isFlushing
                state.isFlushing = true
                return start
            }
            if start { Task { await self.flush() } }
        }
    }

    /// Updates waiting for Redis (for tests and the log).
    public var pendingCount: Int { state.withLock { $0.pending.count } }

    private func enqueue(_ updates: [Update], into state: inout State) {
        state.pending += updates
        let excess = state.pending.count - Self.maximumPending
        if excess > 0 {
            state.pending.removeFirst(excess)
            state.dropped += excess
        }
    }

    private func remember(_ updates: [Update], echo: Bool = true) {
        let now = ContinuousClock.now
        let startEcho = state.withLock { state -> Bool in
            if echo {
                state.echoes += updates.map { Written(at: now, update: $0) }
                if state.echoes.count > Self.maximumPending { state.echoes.removeFirst(state.echoes.count - Self.maximumPending) }
            }
            let start = echo && !state.isEchoing
            if start { state.isEchoing = true }
            state.recent += updates.map { Written(at: now, update: $0) }
            let cutoff = now - Self.replayWindow
            if let keep = state.recent.firstIndex(where: { $0.at >= cutoff }) {
                if keep > 0 { state.recent.removeFirst(keep) }
            } else {
                state.recent.removeAll()
            }
            if state.recent.count > Self.maximumPending { state.recent.removeFirst(state.recent.count - Self.maximumPending) }
            return start
        }
        if startEcho { Task { await self.echo() } }
    }

    /// Writes each update once more ``echoDelay`` after its first write, until none is left.
    private func echo() async {
        while true {
            let (due, wait) = state.withLock { state -> ([Update], Duration?) in
                guard let first = state.echoes.first else {
                    state.isEchoing = false
                    return ([], nil)
                }
                let now = ContinuousClock.now
                let ready = state.echoes.prefix { now - $0.at >= echoDelay }
                if ready.isEmpty { return ([], echoDelay - (now - first.at)) }
                state.echoes.removeFirst(ready.count)
                return (ready.map(\.update), .zero)
            }
            if !due.isEmpty {
                await write(due, echo: false)
            } else if let wait {
                try? await Task.sleep(for: Swift.max(wait, .milliseconds(100)))
            } else {
                return
            }
        }
    }

    private func flush() async {
        var failures = 0
        while true {
            let (batch, replayed, dropped) = state.withLock { state -> ([Update], Int, Int) in
                var batch: [Update] = []
                var replayed = 0
                if state.replay {
                    batch = state.recent.map(\.update)
                    replayed = batch.count
                }
                batch += state.pending.prefix(1000)
                let dropped = state.dropped
                state.dropped = 0
                if batch.isEmpty { state.isFlushing = false }
                return (batch, replayed, dropped)
            }
            if dropped > 0 {
                logger.warning(
                    "dropped delivery-report updates: too many waited for Redis (reports of those requests undercount)",
                    metadata: ["push.dropped": "\(dropped)"])
            }
            if batch.isEmpty { return }
            do {
                try await send(batch)
                logger.debug(
                    "wrote waiting delivery-report updates",
                    metadata: ["push.updates": "\(batch.count)", "push.replayed": "\(replayed)", "push.removed": "\(Self.removedTokens(batch))"])
                failures = 0
                let fresh = Array(batch.dropFirst(replayed))
                state.withLock { state in
                    state.replay = false
                    state.pending.removeFirst(Swift.min(fresh.count, state.pending.count))
                }
                remember(fresh)
                if replayed > 0 {
                    logger.info("wrote delivery-report updates again after Redis trouble", metadata: ["push.updates": "\(batch.count)"])
                }
            } catch {
                try? await Task.sleep(for: Backoff.redis.delay(afterFailures: failures))
                failures += 1
            }
        }
    }

    /// The removed tokens among `updates`, redacted as in other logs.
    private static func removedTokens(_ updates: [Update]) -> String {
        updates.compactMap { update -> String? in
            guard case .removed(_, _, let token) = update else { return nil }
            return DeviceToken.redacted(hex: token)
        }.joined(separator: ",")
    }

    private func send(_ updates: [Update]) async throws(RedisError) {
        var settled: [String: [RequestReports.SettledBatch]] = [:]
        var removed: [(app: String, requestID: String, token: String)] = []
        for update in updates {
            switch update {
            case .settled(let app, let batch): settled[app, default: []].append(batch)
            case .removed(let app, let requestID, let token): removed.append((app, requestID, token))
            }
        }
        for (app, batches) in settled {
            try await reports.recordSettled(app: app, batches: batches)
        }
        try await reports.recordRemoved(removed)
    }
}
