import Foundation
public import Logging
import PushCore
public import Redis
public import ServiceLifecycle
import TokenRegistry

/// Removes tokens that were not registered again for ``FeedbackConfiguration/staleDays``: a periodic,
/// rate-bounded walk over each app's token set that resumes where it stopped.
///
/// For each app of the apps file, at most once per ``FeedbackConfiguration/sweepInterval``, a pass
/// walks the app's token sets, shard after shard, with `SSCAN` (``FeedbackConfiguration/sweepBatchSize``
/// per step, so Redis is never blocked by one call) and runs the invalid-token rule on every token with "invalid
/// since now − stale days" (``TokenRemover``: one pipeline per step; a token registered since stays,
/// atomically). Removals are announced as `token.removed` with reason `Stale`. Steps are spaced so
/// that no more than ``FeedbackConfiguration/sweepRate`` tokens are examined per second.
///
/// State per app, in Redis so a restart resumes the pass where it stopped (`SSCAN` cursors stay valid
/// between calls):
///
/// | key | type | holds |
/// |---|---|---|
/// | `{prefix}:{<app>}:sweep` | hash | `cursor` (`<shard>:<SSCAN cursor>`; `0` between passes), `pass_started_at`, `last_pass_completed_at` (ms), `scanned`, `removed` (this pass) |
/// | `{prefix}:{<app>}:sweep:lease` | string | the instance sweeping the app; expires ``leaseDuration`` after its last step |
///
/// The lease lets several push-feedback instances run: one sweeps an app while the others skip it. A
/// step's cursor is saved only after its events are confirmed; a step cut short is repeated, and its
/// already-removed tokens are announced again from their removal notes.
public struct StaleTokenSweeper: Service {
    /// How long an app's lease outlives the last step of its holder.
    public static let leaseDuration: Duration = .seconds(60)
    /// The pause after a failed step (Redis or the broker unavailable) before the app is tried again.
    public static let failureBackoff: Duration = .seconds(5)

    private let remover: TokenRemover
    private let redis: any RedisCommandExecutor
    private let apps: [String]
    private let configuration: FeedbackConfiguration
    private let metrics: FeedbackMetrics
    private let logger: Logger
    private let now: @Sendable () -> Int64
    private let owner: String

    /// - Parameters:
    ///   - apps: the bundle ids to sweep.
    ///   - now: the clock, ms since 1970.
    public init(
        remover: TokenRemover,
        redis: any RedisCommandExecutor,
        apps: [String],
        configuration: FeedbackConfiguration,
        logger: Logger,
        now: @escaping @Sendable () -> Int64 = FeedbackClock.milliseconds
    ) {
        self.remover = remover
        self.redis = redis
        self.apps = apps.sorted()
        self.configuration = configuration
        self.metrics = remover.metrics
        var logger = logger
        logger[metadataKey: "push.component"] = "stale-sweep"
        self.logger = logger
        self.now = now
        self.owner = "\(ProcessInfo.processInfo.hostName):\(ProcessInfo.processInfo.processIdentifier):\(UUID().uuidString.prefix(8))"
    }

    /// Sweeps until graceful shutdown; a step in progress is finished (its cursor saved) first. With
    /// the sweep off (``FeedbackConfiguration/staleDays`` 0) it only waits for shutdown.
    public func run() async throws {
        guard configuration.sweepsStaleTokens else {
            try? await gracefulShutdown()
            return
        }
        logger.info(
            "sweeping stale tokens",
            metadata: [
                "push.stale_days": "\(configuration.staleDays)", "push.sweep_rate": "\(configuration.sweepRate)",
                "push.sweep_interval": "\(configuration.sweepInterval)", "push.apps": "\(apps.count)",
            ]
        )
        while !Self.stopping {
            let start = now()
            var nextDue = start + Self.milliseconds(configuration.sweepInterval)
            for app in apps {
                if Self.stopping { break }
                do {
                    nextDue = Swift.min(nextDue, try await sweep(app: app))
                } catch {
                    logger.warning("stale sweep step failed; trying again later", metadata: ["push.app": "\(app)", "push.error": "\(error)"])
                    nextDue = Swift.min(nextDue, now() + Self.milliseconds(Self.failureBackoff))
                }
            }
            await Self.pause(.milliseconds(Swift.max(1000, nextDue - now())))
        }
        logger.info("stale sweep stopped")
    }

    // MARK: One app

    /// Runs or resumes `app`'s pass if it is due; returns when the app is due next (ms since 1970).
    ///
    /// - Throws: when Redis or the broker failed; the pass resumes from its last saved step.
    func sweep(app: String) async throws -> Int64 {
        let keys = SweepKeys(prefix: configuration.keyPrefix, app: app)
        let interval = Self.milliseconds(configuration.sweepInterval)
        let state = try await redis.execute("HMGET", keys.state, "cursor", "last_pass_completed_at", "scanned", "removed").array ?? []
        func field(_ index: Int) -> String? { index < state.count ? state[index].string : nil }
        var cursor = field(0) ?? "0"
        let lastCompleted = field(1).flatMap { Int64($0) } ?? 0
        let resuming = cursor != "0"
        if !resuming, lastCompleted > 0, lastCompleted + interval > now() {
            return lastCompleted + interval
        }
        let leaseMilliseconds = Self.milliseconds(Self.leaseDuration)
        let acquired = try await redis.execute("SET", keys.lease, owner, "NX", "PX", String(leaseMilliseconds))
        guard !acquired.isNull else {
            return now() + leaseMilliseconds
        }
        var scanned = resuming ? (field(2).flatMap { Int($0) } ?? 0) : 0
        var removed = resuming ? (field(3).flatMap { Int($0) } ?? 0) : 0
        do {
            if !resuming {
                guard try await save(keys, ["cursor", "0", "pass_started_at", String(now()), "scanned", "0", "removed", "0"]) else {
                    return now() + leaseMilliseconds
                }
                logger.info("stale sweep pass started", metadata: ["push.app": "\(app)"])
            }
            // The step before a restart or failure may have removed tokens without announcing them.
            var reannounce = resuming
            while true {
                if Self.stopping {
                    try await release(keys)
                    return now()
                }
                let stepStart = ContinuousClock.now
                let stepNow = now()
                let page = try await remover.registry.tokenPage(app: app, cursor: cursor, count: configuration.sweepBatchSize)
                let since = stepNow - configuration.staleAge
                let reports = page.tokens.map {
                    InvalidTokenReport(app: app, token: $0, reason: InvalidTokenReport.staleReason, invalidSince: since)
                }
                let tally = try await remover.apply(reports, now: stepNow, reannounce: reannounce)
                reannounce = false
                if page.foreign > 0 {
                    logger.warning(
                        "the token set holds members that are not tokens; left alone",
                        metadata: ["push.app": "\(app)", "push.count": "\(page.foreign)"])
                }
                for refusal in tally.refusals {
                    logger.error("registry refused a stale-token removal", metadata: ["push.app": "\(app)", "push.error": "\(refusal)"])
                }
                let examined = page.tokens.count + page.foreign
                scanned += examined
                removed += tally.removed
                metrics.sweepScanned(examined)
                var fields = ["cursor", page.next, "scanned", String(scanned), "removed", String(removed)]
                if page.next == "0" { fields += ["last_pass_completed_at", String(now())] }
                guard try await save(keys, fields) else {
                    logger.warning("lost the sweep lease of an app to another instance", metadata: ["push.app": "\(app)"])
                    return now() + leaseMilliseconds
                }
                if page.next == "0" {
                    try await release(keys)
                    metrics.sweepPassCompleted(app: app, atSeconds: Double(now()) / 1000)
                    logger.info(
                        "stale sweep pass completed", metadata: ["push.app": "\(app)", "push.scanned": "\(scanned)", "push.removed": "\(removed)"])
                    return now() + interval
                }
                cursor = page.next
                // At most `sweepRate` tokens a second: a step of n tokens takes at least n / rate.
                let budget = Duration.seconds(Double(Swift.max(1, examined)) / Double(configuration.sweepRate))
                let elapsed = ContinuousClock.now - stepStart
                if elapsed < budget { await Self.pause(budget - elapsed) }
            }
        } catch {
            try? await release(keys)
            throw error
        }
    }

    // MARK: Redis state

    /// Saves `fields` to the app's state and renews the lease, if this instance still holds it.
    private func save(_ keys: SweepKeys, _ fields: [String]) async throws(RedisError) -> Bool {
        let reply = try await redis.evalScript(
            Self.saveScript,
            keys: [keys.lease, keys.state],
            args: [owner, String(Self.milliseconds(Self.leaseDuration))] + fields
        )
        return reply.integer == 1
    }

    private func release(_ keys: SweepKeys) async throws(RedisError) {
        _ = try await redis.evalScript(Self.releaseScript, keys: [keys.lease], args: [owner])
    }

    /// `KEYS[1]` = lease, `KEYS[2]` = state; `ARGV[1]` = owner, `ARGV[2]` = lease ms, then field/value
    /// pairs. Saves and renews only for the lease's holder: `1`, else `0`.
    static let saveScript = RedisScript(
        """
        if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
        redis.call('PEXPIRE', KEYS[1], ARGV[2])
        redis.call('HSET', KEYS[2], unpack(ARGV, 3))
        return 1
        """
    )

    /// Drops the lease if this instance holds it.
    static let releaseScript = RedisScript(
        """
        if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
        return 0
        """
    )

    // MARK: Helpers

    private static var stopping: Bool { Task.isShuttingDownGracefully || Task.isCancelled }

    /// Sleeps `duration`, or less when graceful shutdown starts.
    private static func pause(_ duration: Duration) async {
        try? await cancelWhenGracefulShutdown { try await Task.sleep(for: duration) }
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}

/// The sweep's Redis keys for one app (in the app's hash tag, like the registry's).
struct SweepKeys: Sendable, Hashable {
    let state: String
    let lease: String

    init(prefix: String, app: String) {
        state = "\(prefix):{\(app)}:sweep"
        lease = "\(prefix):{\(app)}:sweep:lease"
    }
}
