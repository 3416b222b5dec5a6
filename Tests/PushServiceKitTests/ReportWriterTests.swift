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

/// The running totals the settle script keeps agree with the per-batch fields they summarise,
/// whatever order copies of batches settle in.
@Suite("Report totals", .serialized)
struct ReportTotalsTests {
    @Test func summariesAgreeWithTheWholeReport() async throws {
        let redis = try await TestServers.connectRedis(logger: TestLogger.make("report-totals"))
        let reports = RequestReports(redis: redis, keyPrefix: TestServers.uniqueName("totals"))
        func batch(_ set: String, _ accepted: Int, _ tally: BatchTally, tokens: Int?, key: String? = nil) -> RequestReports.SettledBatch {
            RequestReports.SettledBatch(
                requestID: "r", markSet: set, accepted: accepted, batchKey: key ?? "\(set)#f", tally: tally, tokens: tokens, deliveredAt: 5)
        }
        let steps: [[RequestReports.SettledBatch]] = [
            [batch("a", 90, BatchTally(failed: ["Unregistered": 4], retried: 6), tokens: 100)],
            [batch("b", 50, BatchTally(failed: ["BadDeviceToken": 2, "Unregistered": 1], deferred: 3), tokens: 60)],
            // A redelivered copy of a: more accepted, its tally replaced (fewer retries).
            [batch("a", 94, BatchTally(failed: ["Unregistered": 4], retried: 2), tokens: 100)],
            // An older copy's count again (an echo): the larger count stays, the tally is the copy's.
            [batch("a", 90, BatchTally(failed: ["Unregistered": 4], retried: 2), tokens: 100)],
            // a's retry batch: its own tally field; nothing left to fail; then the same, empty.
            [batch("a", 96, BatchTally(failed: ["Expired": 1]), tokens: nil, key: "a#a1d0#g")],
            [batch("a", 96, BatchTally(), tokens: nil, key: "a#a1d0#g")],
        ]
        for step in steps {
            try await reports.recordSettled(app: "com.test.totals", batches: step)
            let whole = try #require(try await reports.report(app: "com.test.totals", requestID: "r"))
            let summary = try #require(try await reports.summaries(app: "com.test.totals", requestIDs: ["r"]).first)
            #expect(summary.delivered == whole.delivered && summary.sent == whole.sent && summary.failedTotal == whole.failedTotal)
            #expect(summary.retried == whole.retried && summary.deferred == whole.deferred && summary.state == whole.state)
        }
        let final = try #require(try await reports.report(app: "com.test.totals", requestID: "r"))
        #expect(final.delivered == 146 && final.sent == 160 && final.failed == ["Unregistered": 5, "BadDeviceToken": 2])
        #expect(final.retried == 2 && final.deferred == 3)
        _ = try await redis.execute("DEL", reports.reportKey(app: "com.test.totals", requestID: "r"))
        await redis.close()
    }
}
