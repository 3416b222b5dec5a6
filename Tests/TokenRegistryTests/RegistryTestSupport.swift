import Foundation
import PushCore
import Redis
import TestSupport
import TokenRegistry

/// Shared helpers for the registry and rate-limit tests, which run against the real Redis
/// (`TestServers.redisURL`) and fail when it is not there.
enum RegistryTesting {
    static let logger = TestLogger.make("token-registry-tests")

    /// A connected client of the shared test Redis (throws, failing the test, when Redis is missing).
    static func client(poolSize: Int = 2) async throws -> RedisClient {
        var configuration = try TestServers.redisConfiguration()
        configuration.poolSize = poolSize
        return try await RedisClient.connect(configuration: configuration, logger: logger)
    }

    /// An app id no other test uses, so its `{app}` keys are this test's alone.
    static func uniqueApp(_ name: String) -> String {
        TestServers.uniqueName("com.test.\(name)")
    }

    /// A token that is valid and unique: `seed` in hex, padded to 64 digits behind a random prefix.
    static func token(_ seed: Int, prefix: String = TestTokens.randomPrefix()) -> DeviceToken {
        TestTokens.numbered(seed, prefix: prefix)
    }

    /// Deletes every key of `app` under `prefix`: its own tag's (`{app}`) and its shards' (`{app#…}`).
    static func cleanUp(_ redis: RedisClient, prefix: String = "push", app: String) async throws {
        let escaped = app.replacingOccurrences(of: "{", with: "\\{").replacingOccurrences(of: "}", with: "\\}")
        try await redis.deleteKeys(matching: "\(prefix):\\{\(escaped)\\}:*")
        try await redis.deleteKeys(matching: "\(prefix):\\{\(escaped)#*")
    }

    /// A registry whose new apps get the single-tag layout, where every key of an app is under
    /// `{app}` (``keys(_:)``): the tests of the scripts' rules read and write those keys directly.
    /// The sharded layout has tests of its own (`ShardedRegistryTests`).
    static func registry(_ redis: RedisClient, prefix: String = "push") -> TokenRegistry {
        TokenRegistry(redis: redis, keyPrefix: prefix, layouts: RegistryLayouts(redis: redis, keyPrefix: prefix, defaultShards: 1))
    }

    /// `app`'s keys in the single-tag layout.
    static func keys(_ app: String, prefix: String = "push") -> RegistryKeys {
        RegistryLayout.legacy.keys(prefix: prefix, app: app, shard: 0)
    }

    /// Members of a set, sorted.
    static func members(_ redis: RedisClient, _ key: String) async throws -> [String] {
        try await redis.execute("SMEMBERS", key).array?.compactMap(\.string).sorted() ?? []
    }

    static func exists(_ redis: RedisClient, _ key: String) async throws -> Bool {
        try await redis.execute("EXISTS", key).integer == 1
    }
}
