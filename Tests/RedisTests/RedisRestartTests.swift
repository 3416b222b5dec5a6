import Redis
import TestSupport
import Testing

/// Against a private Redis (`scripts/redis.sh`, port 6421) that the test stops and starts.
@Suite("Redis restart", .serialized, .timeLimit(.minutes(1)))
struct RedisRestartTests {
    @Test func recoversAfterARedisRestart() async throws {
        let server = LocalServer(.redis, name: "redis-restart-test", port: 6421)
        try await server.start()

        let configuration = try RedisConfiguration(
            url: server.url + "?connect_timeout_ms=500&command_timeout_ms=1000&pool_size=2", source: "LocalServer.url")
        let client = try await RedisClient.connect(configuration: configuration, logger: RedisTesting.logger)
        let key = RedisTesting.prefix("restart") + ":k"
        try await client.execute("SET", key, "before")
        #expect(client.isConnected)

        // A command in flight when Redis goes away fails with a retryable error; it does not hang.
        let blocking = try await RedisConnection.connect(
            configuration: RedisConfiguration(url: server.url + "?command_timeout_ms=10000"), logger: RedisTesting.logger)
        let blocked = Task {
            try await blocking.send("BLPOP", RedisTesting.prefix("restart") + ":never", "0")
        }
        try await Task.sleep(for: .milliseconds(100))
        let stopped = ContinuousClock.now
        try await server.stop()
        switch await blocked.result {
        case .success(let reply):
            Issue.record("BLPOP should have failed when Redis stopped, got \(reply)")
        case .failure(let error):
            let redisError = try #require(error as? RedisError)
            #expect(redisError.code == .connectionLost, "\(redisError)")
            #expect(redisError.isRetryable)
            #expect(redisError.message.contains("127.0.0.1:6421"), "\(redisError)")
        }
        #expect(ContinuousClock.now - stopped < .seconds(5))
        await blocking.close()

        // While Redis is down, commands fail within the command timeout, naming the address and cause.
        for _ in 0..<2 {
            let started = ContinuousClock.now
            let error = await #expect(throws: RedisError.self) { try await client.send("GET", key) }
            #expect(ContinuousClock.now - started < .seconds(4))
            #expect(error?.isRetryable == true)
            #expect(error?.message.contains("127.0.0.1:6421") == true, "\(error?.message ?? "")")
        }
        let downError = await #expect(throws: RedisError.self) { try await client.send("GET", key) }
        #expect(downError?.code == .connectionFailed)
        #expect(downError?.message.lowercased().contains("connection refused") == true, "\(downError?.message ?? "")")
        #expect(!client.isConnected)

        // Back up: the connections find it again by themselves, in the background (backoff capped at
        // 2 s), before any command asks.
        try await server.start()
        let deadline = ContinuousClock.now + .seconds(5)
        while !client.isConnected, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(client.isConnected)
        // The AOF (appendfsync everysec, flushed on SIGTERM) kept the key.
        #expect(try await client.send("GET", key) == .bulk(Array("before".utf8)))
        for _ in 0..<4 { #expect(try await client.send("PING") == .status("PONG")) }
        #expect(client.isConnected)
        try await client.execute("DEL", key)
        await client.close()
        try await server.stop()
    }
}
