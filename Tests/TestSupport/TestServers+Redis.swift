import Logging
import Redis

extension TestServers {
    /// The shared test Redis (``redisURL``) with extra URL query options (`pool_size=1&…`).
    public static func redisConfiguration(_ options: String = "") throws -> RedisConfiguration {
        var url = redisURL
        if !options.isEmpty { url += (url.contains("?") ? "&" : "?") + options }
        return try RedisConfiguration(url: url, source: "PUSH_TEST_REDIS_URL")
    }

    /// A client of the shared test Redis, connected: throws, failing the test, when Redis is not there.
    public static func connectRedis(_ options: String = "", logger: Logger) async throws -> RedisClient {
        try await RedisClient.connect(configuration: redisConfiguration(options), logger: logger)
    }
}
