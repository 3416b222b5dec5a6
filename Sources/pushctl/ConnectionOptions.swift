import AMQP
import ArgumentParser
import Foundation
import Logging
import PushCore
import Redis
import TokenRegistry

/// `--amqp-url` / `--redis-url`, defaulting to the services' environment variables.
struct ConnectionOptions: ParsableArguments {
    @Option(help: "RabbitMQ URL (default: PUSH_AMQP_URL, else amqp://guest:guest@127.0.0.1:5672/%2f).")
    var amqpURL: String?

    @Option(help: "Redis URL (default: PUSH_REDIS_URL, else redis://127.0.0.1:6379/0).")
    var redisURL: String?

    @Option(help: .hidden)
    var queuePrefix: String = "push"

    /// The queue names (the contract's `push.*`; tests pass a prefix of their own).
    var queues: PushQueues { PushQueues(prefix: queuePrefix) }

    static let quietLogger = Logger(label: "pushctl", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A started connection, connected within 10 s.
    func amqp() async throws -> AMQPConnection {
        let url = amqpURL ?? ProcessInfo.processInfo.environment["PUSH_AMQP_URL"] ?? "amqp://guest:guest@127.0.0.1:5672/%2f"
        let connection = AMQPConnection(configuration: try AMQPConfiguration(url: url, connectionName: "pushctl"), logger: Self.quietLogger)
        do {
            try await connection.waitUntilConnected(timeout: .seconds(10))
        } catch {
            await connection.close()
            throw error
        }
        return connection
    }

    /// The registry as the services see it: an app's new registry gets `PUSH_REGISTRY_SHARDS` shards
    /// (default 24), like theirs.
    func registry(_ redis: RedisClient) throws -> TokenRegistry {
        var shards = RegistryLayout.defaultShards
        if let text = ProcessInfo.processInfo.environment["PUSH_REGISTRY_SHARDS"], !text.isEmpty {
            guard let value = Int(text), (1...RegistryLayout.maximumShards).contains(value) else {
                throw ValidationError("PUSH_REGISTRY_SHARDS: \"\(text)\" is not a whole number (1–\(RegistryLayout.maximumShards))")
            }
            shards = value
        }
        return TokenRegistry(redis: redis, layouts: RegistryLayouts(redis: redis, defaultShards: shards))
    }

    func redis() async throws -> RedisClient {
        let url = redisURL ?? ProcessInfo.processInfo.environment["PUSH_REDIS_URL"] ?? "redis://127.0.0.1:6379/0"
        return try await RedisClient.connect(configuration: try RedisConfiguration(url: url), logger: Self.quietLogger)
    }
}
