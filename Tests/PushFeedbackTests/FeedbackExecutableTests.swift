import Foundation
import PushCore
import Redis
import TestSupport
import Testing
import TokenRegistry

/// `pushctl feedback import` as operators run it, against the shared test RabbitMQ and Redis (it uses
/// the contract's `push` names; the app is the test's own, so its keys are too).
@Suite("pushctl feedback import", .timeLimit(.minutes(2)))
struct FeedbackExecutableTests {
    let pushctl = TestServers.productsDirectory.appendingPathComponent("pushctl").path

    func dump(_ records: [(time: UInt32, token: DeviceToken)], dropLast: Int = 0) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(TestServers.uniqueName("feedback") + ".bin").path
        try Data(LegacyFeedbackStream.encode(records).dropLast(dropLast)).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func aWellFormedDumpIsImported() async throws {
        let app = TestServers.uniqueName("com.test.pushctl-feedback")
        let redis = try await RedisClient.connect(configuration: RedisConfiguration(url: TestServers.redisURL), logger: FeedbackFixture.logger)
        let registry = TokenRegistry(redis: redis)
        let gone = try DeviceToken(normalizing: String(repeating: "d1", count: 32))
        let back = try DeviceToken(normalizing: String(repeating: "d2", count: 32))
        _ = try await registry.upsert(
            app: app, token: gone, registration: DeviceRegistration(user: "zoe"), defaultEnvironment: .production, now: 1_000)
        _ = try await registry.upsert(
            app: app, token: back, registration: DeviceRegistration(user: "zoe"), defaultEnvironment: .production, now: 9_000_000)
        let path = try dump([(time: 2_000, token: gone), (time: 2_000, token: back)])
        defer { try? FileManager.default.removeItem(atPath: path) }

        let child = try ChildProcess([
            pushctl, "feedback", "import", path, "--app", app, "--redis-url", TestServers.redisURL, "--amqp-url", TestServers.amqpURL,
        ])
        let status = await child.waitForExit(timeout: .seconds(30))
        #expect(status == 0, "\(child.output)")
        #expect(child.output.contains("2 records, 2 distinct tokens"), "\(child.output)")
        #expect(child.output.contains("removed 1, kept 1"), "\(child.output)")
        #expect(try await registry.record(app: app, token: gone) == nil)
        #expect(try await registry.record(app: app, token: back) != nil)
        _ = try await registry.delete(app: app, token: back, at: 1 << 50)
        await redis.close()
    }

    @Test func aTruncatedDumpIsRefusedWithTheOffsetBeforeConnectingAnywhere() async throws {
        let first = try DeviceToken(normalizing: String(repeating: "e1", count: 32))
        let path = try dump([(time: 1, token: first), (time: 1, token: first)], dropLast: 1)
        defer { try? FileManager.default.removeItem(atPath: path) }
        // Unreachable servers: the refusal comes from parsing alone.
        let child = try ChildProcess([
            pushctl, "feedback", "import", path, "--app", "com.test.x", "--redis-url", "redis://127.0.0.1:1/0", "--amqp-url",
            "amqp://guest:guest@127.0.0.1:1/%2f",
        ])
        let status = await child.waitForExit(timeout: .seconds(30))
        #expect(status != nil && status != 0)
        #expect(child.output.contains("record 2 at byte 38 is cut short"), "\(child.output)")
        #expect(child.output.contains("nothing was imported"), "\(child.output)")
    }
}
