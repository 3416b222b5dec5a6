public import PushCore
public import RateLimiting
public import Redis
import Synchronization

/// The apps file's `rate_limits` applied to a batch's tokens: `per_device_per_hour` for each token,
/// `per_app_per_second` for the app, both in atomic Redis scripts: one a batch on a standalone Redis,
/// one per shard of the batch on a Redis Cluster (``RateLimiting/RateLimiter/checkBatches(_:sameNode:)``,
/// all in one pipeline).
///
/// Keys: `push:{<app>#<n>}:send:rate:device:<token>` for each token, beside the app's allowance in
/// the same shard, `push:{<app>#<n>}:send:rate:app` (``shards`` shards, ``RedisHashTagSpread``), so
/// one large app's limits use every master of a Redis Cluster. Each shard's allowance is the app's
/// rate over ``shards`` periods, with a burst of its share of the app's, so together they admit the
/// app's rate; a batch's tokens spread evenly over the shards.
public struct SendRateLimits: Sendable {
    private let limiter: RateLimiter
    public let keyPrefix: String
    /// The shards the keys spread over.
    public static let shards = 24

    /// Whether all shards' keys go to one script call (a standalone Redis), or each shard's to its own
    /// (a Redis Cluster, where a script's keys must share a slot).
    public let combinesShards: Bool

    /// - Parameter combinesShards: by default what `redis` says of itself
    ///   (``Redis/RedisCommandExecutor/keysShareOneNode``); tests set it to try both ways.
    public init(redis: any RedisCommandExecutor, keyPrefix: String = "push", combinesShards: Bool? = nil) {
        self.limiter = RateLimiter(redis: redis)
        self.keyPrefix = keyPrefix
        self.combinesShards = combinesShards ?? redis.keysShareOneNode
    }

    /// One decision per token, in order: allowed, or limited with the wait before it would be allowed.
    public func check(app: AppConfiguration, tokens: [String]) async throws(RedisError) -> [RateLimitDecision] {
        let spread = Self.spread(app: app.bundleID)
        var groups: [Int: [Int]] = [:]
        for (index, token) in tokens.enumerated() { groups[spread.index(of: token), default: []].append(index) }
        let shards = groups.keys.sorted()
        let perApp = app.rateLimits.perAppPerSecond
        let checks = shards.map { shard -> BatchRateLimit in
            let tag = spread.tag(shard)
            return BatchRateLimit(
                sharedKey: "\(keyPrefix):{\(tag)}:send:rate:app",
                sharedLimit: perApp,
                sharedPeriod: .seconds(Self.shards),
                sharedBurst: Swift.max(1, (perApp + Self.shards - 1) / Self.shards),
                itemKeys: groups[shard]!.map { "\(keyPrefix):{\(tag)}:send:rate:device:\(tokens[$0])" },
                itemLimit: app.rateLimits.perDevicePerHour,
                itemPeriod: .seconds(3600)
            )
        }
        let answers = try await limiter.checkBatches(checks, sameNode: combinesShards)
        var decisions = [RateLimitDecision](repeating: .allowed(remaining: 0), count: tokens.count)
        for (shard, answer) in zip(shards, answers) {
            for (index, decision) in zip(groups[shard]!, answer) { decisions[index] = decision }
        }
        return decisions
    }

    static func spread(app: String) -> RedisHashTagSpread {
        spreads.withLock { cache in
            if let found = cache[app] { return found }
            let spread = RedisHashTagSpread(name: app, count: shards)
            cache[app] = spread
            return spread
        }
    }

    private static let spreads = Mutex<[String: RedisHashTagSpread]>([:])
}
