public import PushCore
public import RateLimiting
public import Redis

/// The apps file's `rate_limits` applied to a batch's tokens: `per_device_per_hour` for each token,
/// `per_app_per_second` for the app, both in one atomic Redis script per batch
/// (``RateLimiting/RateLimiter/checkBatch(_:)``).
///
/// Keys: `push:{<app>}:send:rate:app` and `push:{<app>}:send:rate:device:<token>` (one hash tag, one
/// Cluster slot).
public struct SendRateLimits: Sendable {
    private let limiter: RateLimiter
    public let keyPrefix: String

    public init(redis: any RedisCommandExecutor, keyPrefix: String = "push") {
        self.limiter = RateLimiter(redis: redis)
        self.keyPrefix = keyPrefix
    }

    /// One decision per token, in order: allowed, or limited with the wait before it would be allowed.
    public func check(app: AppConfiguration, tokens: [String]) async throws(RedisError) -> [RateLimitDecision] {
        try await limiter.checkBatch(
            BatchRateLimit(
                sharedKey: "\(keyPrefix):{\(app.bundleID)}:send:rate:app",
                sharedLimit: app.rateLimits.perAppPerSecond,
                sharedPeriod: .seconds(1),
                itemKeys: tokens.map { "\(keyPrefix):{\(app.bundleID)}:send:rate:device:\($0)" },
                itemLimit: app.rateLimits.perDevicePerHour,
                itemPeriod: .seconds(3600)
            )
        )
    }
}
