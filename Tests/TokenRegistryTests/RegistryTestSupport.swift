import Foundation
import Logging
import PushCore
import Redis
import TestSupport
import TokenRegistry

/// Shared helpers for the registry and rate-limit tests, which run against the real Redis
/// (`TestServers.redisURL`) and fail when it is not there.
enum RegistryTesting {
    static let logger: Logger = {
        var logger = Logger(label: "token-registry-tests")
        logger.logLevel = .warning
        return logger
    }()

    /// A connected client of the shared test Redis (throws, failing the test, when Redis is missing).
    static func client(poolSize: Int = 2) async throws -> RedisClient {
        var configuration = try RedisConfiguration(url: TestServers.redisURL, source: "PUSH_TEST_REDIS_URL")
        configuration.poolSize = poolSize
        return try await RedisClient.connect(configuration: configuration, logger: logger)
    }

    /// An app id no other test uses, so its `{app}` keys are this test's alone.
    static func uniqueApp(_ name: String) -> String {
        TestServers.uniqueName("com.test.\(name)")
    }

    /// A token that is valid and unique: `seed` in hex, padded to 64 digits behind a random prefix.
    static func token(_ seed: Int, prefix: String = randomPrefix()) -> DeviceToken {
        let tail = String(seed, radix: 16)
        let hex = prefix + String(repeating: "0", count: 64 - prefix.count - tail.count) + tail
        return try! DeviceToken(normalizing: hex)
    }

    static func randomPrefix() -> String {
        String(UInt64.random(in: 0...UInt64.max), radix: 16).padding(toLength: 16, withPad: "0", startingAt: 0)
    }

    /// Deletes every key of `app` under `prefix` (SCAN MATCH, bounded by the keyspace size).
    static func cleanUp(_ redis: RedisClient, prefix: String = "push", app: String) async throws {
        let pattern = RegistryKeys(prefix: prefix, app: app).base.replacingOccurrences(of: "{", with: "\\{")
            .replacingOccurrences(of: "}", with: "\\}") + "*"
        var cursor = "0"
        for _ in 0..<100_000 {
            let reply = try await redis.execute("SCAN", cursor, "MATCH", pattern, "COUNT", "1000")
            guard let page = reply.array, page.count == 2 else { throw UnexpectedReply(reply: reply) }
            cursor = page[0].string ?? "0"
            let keys = (page[1].array ?? []).compactMap(\.string)
            if !keys.isEmpty { try await redis.execute(RedisCommand(["UNLINK"] + keys)) }
            if cursor == "0" { return }
        }
    }

    /// Members of a set, sorted.
    static func members(_ redis: RedisClient, _ key: String) async throws -> [String] {
        try await redis.execute("SMEMBERS", key).array?.compactMap(\.string).sorted() ?? []
    }

    static func exists(_ redis: RedisClient, _ key: String) async throws -> Bool {
        try await redis.execute("EXISTS", key).integer == 1
    }
}

struct UnexpectedReply: Error, CustomStringConvertible {
    let reply: RedisReply
    var description: String { "unexpected reply \(reply)" }
}
