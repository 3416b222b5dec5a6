import AMQP
import Foundation
import Logging
import PushCore
import PushFeedback
import PushServiceKit
import Redis
import ServiceLifecycle
import TokenRegistry

/// push-feedback's throughput: N `push.feedback` events through ``FeedbackQueueConsumer`` against a
/// real RabbitMQ and Redis (normally private ones that Benchmarks/feedback/run.sh starts).
///
/// Setup (not timed): registers N tokens (a user per 10 tokens, a topic each), publishes N events — 90%
/// reported after their registration (removed), 10% before a re-registration (kept) — to a queue
/// set of its own (`feedback-bench.*`), with a queue bound to `token.removed` so the events are
/// stored like a real listener's. Timed: from the consumer's start until every event is settled
/// (`push.feedback` empty, every removal announced, the token set down to the kept ones).
///
/// Environment: PUSH_AMQP_URL, PUSH_REDIS_URL (the servers), FEEDBACK_BENCH_COUNT (100000),
/// FEEDBACK_BENCH_BATCH (500), FEEDBACK_BENCH_IN_FLIGHT (4).
@main
struct FeedbackBench {
    static func main() async throws {
        let environment = ProcessInfo.processInfo.environment
        let count = Int(environment["FEEDBACK_BENCH_COUNT"] ?? "") ?? 100_000
        let configuration = FeedbackConfiguration(
            batchSize: Int(environment["FEEDBACK_BENCH_BATCH"] ?? "") ?? 500,
            batchesInFlight: Int(environment["FEEDBACK_BENCH_IN_FLIGHT"] ?? "") ?? 4,
            keyPrefix: "fbbench"
        )
        var logger = Logger(label: "feedback-bench")
        logger.logLevel = .warning
        let names = PushQueues(prefix: "feedback-bench")
        let eventsQueue = "feedback-bench.events"
        // A listener's queue on token.removed, as other services would bind (FEEDBACK_BENCH_LISTENER=0:
        // none, so the exchange drops the events and only push-feedback's own work is measured).
        let listener = environment["FEEDBACK_BENCH_LISTENER"] != "0"
        var topology = AMQPTopology.push(names)
        if listener {
            topology.queues.append(AMQPTopology.Queue(name: eventsQueue))
            topology.bindings.append(AMQPTopology.Binding(queue: eventsQueue, exchange: names.eventsExchange, routingKey: "token.removed"))
        }

        let amqp = AMQPConnection(
            configuration: try AMQPConfiguration(
                url: environment["PUSH_AMQP_URL"] ?? "amqp://guest:guest@127.0.0.1:5672/%2f", connectionName: "feedback-bench"),
            topology: topology,
            logger: logger
        )
        try await amqp.waitUntilConnected(timeout: .seconds(30))
        for queue in names.allQueueNames + [eventsQueue] { _ = try? await amqp.deleteQueue(queue) }
        await amqp.close()
        let connection = AMQPConnection(configuration: amqp.configuration, topology: topology, logger: logger)
        try await connection.waitUntilConnected(timeout: .seconds(30))
        let redis = try await RedisClient.connect(
            configuration: try RedisConfiguration(url: environment["PUSH_REDIS_URL"] ?? "redis://127.0.0.1:6379/0"),
            logger: logger
        )
        let registry = TokenRegistry(redis: redis, keyPrefix: configuration.keyPrefix)
        let app = "com.example.feedback-bench"
        func tokensLeft() async throws -> Int { try await registry.tokenCounts(app: app).reduce(0) { $0 + $1.tokens } }

        // Setup: tokens and events.
        let setupStart = ContinuousClock.now
        let tokens = (0..<count).map { index in
            let tail = String(index, radix: 16)
            return try! DeviceToken(normalizing: "fb" + String(repeating: "0", count: 62 - tail.count) + tail)
        }
        let kept: @Sendable (Int) -> Bool = { index in index % 10 == 9 }
        try await withThrowingTaskGroup(of: Void.self) { group in
            let workers = 32
            for worker in 0..<workers {
                group.addTask {
                    for index in stride(from: worker, to: count, by: workers) {
                        _ = try await registry.upsert(
                            app: app,
                            token: tokens[index],
                            registration: DeviceRegistration(user: "user\(index / 10)", topics: ["news"]),
                            defaultEnvironment: .production,
                            now: kept(index) ? 3_000 : 1_000
                        )
                    }
                }
            }
            try await group.waitForAll()
        }
        let encoder = JSONEncoder()
        for chunk in stride(from: 0, to: count, by: 2000) {
            let messages = try (chunk..<min(chunk + 2000, count)).map { index in
                let event = FeedbackEvent(app: app, token: tokens[index].hex, reason: "Unregistered", timestamp: 2_000, reportedAt: 2_500)
                return AMQPOutboundMessage(exchange: names.exchange, routingKey: names.feedback.routingKey, body: Array(try encoder.encode(event)))
            }
            for result in await connection.publish(messages) { try result.get() }
        }
        let expectedRemoved = (0..<count).filter { !kept($0) }.count
        print("setup: \(count) tokens registered and \(count) events queued in \(seconds(ContinuousClock.now - setupStart)) s")

        // Timed: the consumer works the backlog off.
        let apps = try AppsFile(apps: [
            AppConfiguration(
                bundleID: app, environment: .production,
                apns: .token(AppConfiguration.TokenKey(keyFile: "k.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ")))
        ])
        let consumer = FeedbackQueueConsumer(
            amqp: connection,
            registry: registry,
            apps: apps,
            queues: names,
            configuration: configuration,
            metrics: FeedbackMetrics(),
            logger: logger
        )
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: [consumer], gracefulShutdownSignals: [], logger: logger))
        let serverPIDs = (environment["FEEDBACK_BENCH_SERVER_PIDS"] ?? "").split(separator: ",").compactMap { Int($0) }
        let cpuBefore = (own: cpuTicks("self"), servers: serverPIDs.map { cpuTicks(String($0)) })
        let start = ContinuousClock.now
        let running = Task { try await group.run() }
        let deadline = start + .seconds(300)
        var removedSoFar = 0
        while ContinuousClock.now < deadline {
            let remaining = try await connection.queueStatus(names.feedback.name).messages
            if listener { removedSoFar = try await connection.queueStatus(eventsQueue).messages }
            let left = try await tokensLeft()
            if remaining == 0, !listener || removedSoFar >= expectedRemoved, left == count - expectedRemoved { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        // Every event is taken and every removal done: shutting down now settles the last batches
        // (their events confirmed, their deliveries acked), and the run ends when the consumer returns.
        await group.triggerGracefulShutdown()
        try await running.value
        let elapsed = ContinuousClock.now - start
        let cpuAfter = (own: cpuTicks("self"), servers: serverPIDs.map { cpuTicks(String($0)) })
        if listener { removedSoFar = try await connection.queueStatus(eventsQueue).messages } else { removedSoFar = expectedRemoved }
        let unsettled = try await connection.queueStatus(names.feedback.name).messages
        guard unsettled == 0 else {
            print("\(unsettled) events are back in the queue after the run")
            throw ExitCode.failure
        }
        guard removedSoFar >= expectedRemoved else {
            print("did not finish within 300 s: \(removedSoFar) of \(expectedRemoved) removals announced")
            throw ExitCode.failure
        }
        let rate = Double(count) / seconds(elapsed)
        print(
            "feedback: \(count) events (\(expectedRemoved) removed, \(count - expectedRemoved) kept) in \(String(format: "%.2f", seconds(elapsed))) s = \(Int(rate)) events/s"
                + " (batch \(configuration.batchSize), \(configuration.batchesInFlight) in flight)"
        )
        print(
            "token.removed events \(listener ? "stored in the listener's queue: \(removedSoFar)" : "published with no listener bound"); tokens left: \(try await tokensLeft())"
        )
        print("peak RSS of the bench process (setup included): \(peakRSS())")
        // Jiffies are 1/100 s: % of one core = jiffies / seconds.
        let timed = seconds(elapsed)
        var shares = ["consumer \(Int(Double(cpuAfter.own - cpuBefore.own) / timed))%"]
        for (index, pid) in serverPIDs.enumerated() {
            shares.append("pid \(pid) \(Int(Double(cpuAfter.servers[index] - cpuBefore.servers[index]) / timed))%")
        }
        print("CPU while timed (% of one core): \(shares.joined(separator: ", "))")

        for queue in names.allQueueNames + [eventsQueue] { _ = try? await connection.deleteQueue(queue) }
        await connection.close()
        await redis.close()
    }

    static func seconds(_ duration: Duration) -> Double {
        let (whole, attoseconds) = duration.components
        return Double(whole) + Double(attoseconds) / 1e18
    }

    /// utime + stime of a process, in clock ticks (1/100 s).
    static func cpuTicks(_ pid: String) -> Int {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command: state is field 3, so utime (14) and stime (15) are at 11 and 12.
        guard fields.count > 12 else { return 0 }
        return (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
    }

    static func peakRSS() -> String {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return "unknown" }
        return status.split(separator: "\n").first { $0.hasPrefix("VmHWM") }.map {
            $0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().joined(separator: " ")
        } ?? "unknown"
    }
}

struct ExitCode: Error {
    static let failure = ExitCode()
}
