import Foundation
import Glibc
import Logging
import Redis
import TestSupport

/// Shared helpers for the tests that talk to a real Redis.
enum RedisTesting {
    static let logger: Logger = {
        var logger = Logger(label: "redis-tests")
        logger.logLevel = .warning
        return logger
    }()

    /// The shared test Redis (`TestServers.redisURL`) with extra query options.
    static func configuration(_ options: String = "") throws -> RedisConfiguration {
        var url = TestServers.redisURL
        if !options.isEmpty { url += (url.contains("?") ? "&" : "?") + options }
        return try RedisConfiguration(url: url, source: "PUSH_TEST_REDIS_URL")
    }

    /// A client of the shared Redis, connected (throws, so the test fails, when Redis is not there).
    static func client(_ options: String = "") async throws -> RedisClient {
        try await RedisClient.connect(configuration: configuration(options), logger: logger)
    }

    /// A key prefix this test alone uses, with a hash tag as the service keys have.
    static func prefix(_ name: String) -> String {
        "{\(TestServers.uniqueName("redis-tests.\(name)"))}"
    }
}
