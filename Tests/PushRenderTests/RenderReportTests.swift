import Foundation
import PushCore
import PushRender
import PushServiceKit
import Redis
import Testing
import TokenRegistry

/// What push-render contributes to the delivery reports: the recent list and `started_at` when it
/// first takes a request, the counts in its progress record, and `dead` for a request it refused.
@Suite(.serialized) struct RenderReportTests {
    @Test func aRenderedRequestHasAReportAndIsListedOnceAmongTheRecent() async throws {
        try await withRenderFixture("report") { fixture in
            for seed in 1...3 {
                try await fixture.register(fixture.token(seed), DeviceRegistration(user: "u\(seed)", topics: ["news"]))
            }
            try await fixture.register(
                fixture.token(4), DeviceRegistration(topics: ["news"], settings: NotificationSettings(alert: false, badge: false, sound: false)))
            let request = #"{"id": "report-1", "app": "\#(fixture.app)", "to": {"topic": "news"}, "payload": {"aps": {"alert": "hi"}}}"#
            try await fixture.run { _ in
                try await fixture.publish(request)
                try await fixture.waitUntilDone("report-1")
                try await fixture.publish(request)
                try await fixture.waitUntilRequestsSettled()
            }
            let reports = RequestReports(redis: fixture.redis, keyPrefix: fixture.keyPrefix)
            let report = try #require(try await reports.report(app: fixture.app, requestID: "report-1"))
            #expect(report.targeted == 4 && report.skipped == 1 && report.sent == 3 && report.batches >= 1)
            #expect(report.state == .sending, "rendered; push-send has not settled anything")
            #expect(report.startedAt != nil)
            let recent = try await reports.recent(app: fixture.app, limit: 10)
            #expect(recent.map(\.id) == ["report-1"], "listed once, though delivered twice")
        }
    }

    @Test func aRefusedRequestIsReportedDeadWithItsReasonWhenItNamesAnAppAndAnID() async throws {
        try await withRenderFixture("report-dead") { fixture in
            try await fixture.run { _ in
                try await fixture.publish(#"{"id": "dead-1", "app": "\#(fixture.app)", "to": {"topic": "news"}}"#)
                try await fixture.publish(#"{"id": "dead-2", "app": "com.unknown", "to": {"topic": "news"}}"#)
                _ = try await fixture.receive(from: fixture.names.dead, count: 2)
            }
            let reports = RequestReports(redis: fixture.redis, keyPrefix: fixture.keyPrefix)
            let dead = try #require(try await reports.report(app: fixture.app, requestID: "dead-1"))
            #expect(dead.state == .dead)
            #expect(dead.deadReason?.hasPrefix("payload") == true)
            #expect(try await reports.report(app: "com.unknown", requestID: "dead-2") == nil, "no report under an app nobody configured")

            // The same id again, fixed: push-render takes it, and the report is no longer dead; an
            // invalid copy after that does not make it dead again.
            try await fixture.run { _ in
                try await fixture.publish(#"{"id": "dead-1", "app": "\#(fixture.app)", "to": {"topic": "news"}, "payload": {"aps": {"alert": "x"}}}"#)
                try await fixture.waitUntilDone("dead-1")
                try await fixture.publish(#"{"id": "dead-1", "app": "\#(fixture.app)", "to": {"topic": "news"}}"#)
                _ = try await fixture.receive(from: fixture.names.dead, count: 1)
            }
            let fixed = try #require(try await reports.report(app: fixture.app, requestID: "dead-1"))
            #expect(fixed.state == .done && fixed.deadReason == nil)
        }
    }
}
