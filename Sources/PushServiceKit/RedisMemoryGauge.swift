import Foundation
import Metrics
public import Redis
public import ServiceLifecycle

/// `push_redis_memory_used_ratio`: Redis' `used_memory` over its `maxmemory`, sampled every
/// ``interval`` from `INFO memory` (on a Redis Cluster, from the node this service's connection
/// asks). With `maxmemory-policy noeviction` Redis refuses writes once it is full, so registrations
/// fail (503) until ops make room: the shipped alert `PushRedisMemoryHigh` fires at 0.8, before
/// that. 0 while Redis has no `maxmemory` (no ratio to give).
public struct RedisMemoryGauge: Service {
    let redis: any RedisCommandExecutor
    let interval: Duration

    public init(redis: any RedisCommandExecutor, interval: Duration = .seconds(15)) {
        self.redis = redis
        self.interval = interval
    }

    /// `used_memory / maxmemory` of an `INFO memory` answer; 0 without a `maxmemory`, nil when the
    /// answer has no `used_memory`.
    public static func usedRatio(info: String) -> Double? {
        var used: Double?
        var maximum: Double = 0
        for line in info.split(whereSeparator: \.isNewline) {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2 else { continue }
            switch parts[0] {
            case "used_memory": used = Double(parts[1].trimmingCharacters(in: .whitespaces))
            case "maxmemory": maximum = Double(parts[1].trimmingCharacters(in: .whitespaces)) ?? 0
            default: break
            }
        }
        guard let used else { return nil }
        return maximum > 0 ? used / maximum : 0
    }

    public func run() async throws {
        let gauge = Gauge(label: "push_redis_memory_used_ratio")
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                if let reply = try? await self.redis.execute(RedisCommand(["INFO", "memory"])), let text = reply.string,
                    let ratio = Self.usedRatio(info: text)
                {
                    gauge.record(ratio)
                }
                try? await Task.sleep(for: self.interval)
            }
        }
    }
}
