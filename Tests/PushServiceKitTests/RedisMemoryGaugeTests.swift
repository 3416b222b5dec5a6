import PushServiceKit
import Redis
import TestSupport
import Testing

struct RedisMemoryGaugeTests {
    @Test func theRatioIsUsedOverMaxmemoryAndZeroWithoutOne() {
        let info = "# Memory\r\nused_memory:800000\r\nused_memory_human:781.25K\r\nmaxmemory:1000000\r\nmaxmemory_policy:noeviction\r\n"
        #expect(RedisMemoryGauge.usedRatio(info: info) == 0.8)
        #expect(RedisMemoryGauge.usedRatio(info: "used_memory:1000\r\nmaxmemory:0\r\n") == 0)
        #expect(RedisMemoryGauge.usedRatio(info: "# Memory\r\n") == nil)
    }

    /// The gauge's reading against the test Redis: its own INFO answer parses.
    @Test func theTestRedisAnswersWithAUsedMemory() async throws {
        let redis = try await TestServers.connectRedis(logger: TestLogger.make("redis-memory"))
        let info = try #require(try await redis.execute("INFO", "memory").string)
        #expect(RedisMemoryGauge.usedRatio(info: info) != nil)
        await redis.close()
    }
}
