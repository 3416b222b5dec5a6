import Foundation
import Glibc
import Redis
import TestSupport

/// Shared helpers for the tests that talk to a real Redis.
enum RedisTesting {
    static let logger = TestLogger.make("redis-tests")

    /// A client of the shared Redis with extra query options, connected (throws, so the test fails,
    /// when Redis is not there).
    static func client(_ options: String = "") async throws -> RedisClient {
        try await TestServers.connectRedis(options, logger: logger)
    }

    /// A key prefix this test alone uses, with a hash tag as the service keys have.
    static func prefix(_ name: String) -> String {
        "{\(TestServers.uniqueName("redis-tests.\(name)"))}"
    }
}
