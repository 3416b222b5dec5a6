import PushCore
import PushServiceKit
import Redis
import TestSupport
import Testing

/// Report updates survive Redis trouble: written again once Redis is back, and the last seconds'
/// updates written once more after a failure (they may have been lost with a killed Redis).
@Suite("ReportWriter", .serialized, .timeLimit(.minutes(1)))
struct ReportWriterTests {
    static func settled(_ markSet: String, accepted: Int) -> ReportWriter.Update {
        .settled(
            app: "com.test.writer",
            batch: RequestReports.SettledBatch(
                requestID: "r1", markSet: markSet, accepted: accepted, batchKey: "\(markSet)#0", tally: BatchTally(), tokens: accepted,
                deliveredAt: 1_000))
    }

    @Test func updatesWaitForRedisAndRecentOnesAreWrittenAgainAfterItLostThem() async throws {
        let server = LocalServer(.redis, name: "report-writer-test", port: 6433)
        try await server.start()
        let configuration = try RedisConfiguration(url: server.url + "?connect_timeout_ms=300&command_timeout_ms=500", source: "LocalServer.url")
        let redis = try await RedisClient.connect(configuration: configuration, logger: TestLogger.make("report-writer"))
        let reports = RequestReports(redis: redis, keyPrefix: "writer")
        let writer = ReportWriter(reports: reports, logger: TestLogger.make("report-writer"))

        await writer.write([Self.settled("a", accepted: 10)])
        #expect(try await reports.report(app: "com.test.writer", requestID: "r1")?.delivered == 10)
        // As if Redis lost its last second of writes, then went away.
        _ = try await redis.execute("DEL", reports.reportKey(app: "com.test.writer", requestID: "r1"))
        try await server.stop()
        await writer.write([Self.settled("b", accepted: 5)])
        #expect(writer.pendingCount == 1, "kept while Redis is down")
        try await server.start()

        let deadline = ContinuousClock.now + .seconds(20)
        while writer.pendingCount > 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(100)) }
        #expect(writer.pendingCount == 0)
        let report = try #require(try await reports.report(app: "com.test.writer", requestID: "r1"))
        #expect(report.delivered == 15, "b waited for Redis; a was written again")
        #expect(report.sent == 15)
        _ = try await redis.execute("DEL", reports.reportKey(app: "com.test.writer", requestID: "r1"))
        await redis.close()
        try await server.stop()
    }

    @Test func everyUpdateIsWrittenOnceMoreLaterInCaseAFailoverLostIt() async throws {
        let redis = try await TestServers.connectRedis(logger: TestLogger.make("report-writer"))
        let reports = RequestReports(redis: redis, keyPrefix: TestServers.uniqueName("writer-echo"))
        let writer = ReportWriter(reports: reports, logger: TestLogger.make("report-writer"), echoDelay: .milliseconds(300))
        await writer.write([Self.settled("a", accepted: 7)])
        // As a Redis Cluster master that failed over before replicating it: gone, and no write failed.
        _ = try await redis.execute("DEL", reports.reportKey(app: "com.test.writer", requestID: "r1"))
        #expect(try await reports.report(app: "com.test.writer", requestID: "r1") == nil)
        var report: RequestReport?
        for _ in 0..<50 where report == nil {
            try await Task.sleep(for: .milliseconds(100))
            report = try await reports.report(app: "com.test.writer", requestID: "r1")
        }
        #expect(report?.delivered == 7, "written again by the echo")
        _ = try await redis.execute("DEL", reports.reportKey(app: "com.test.writer", requestID: "r1"))
        await redis.close()
    }
}
