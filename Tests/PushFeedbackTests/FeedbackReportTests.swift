import AMQP
import Foundation
import PushCore
import PushFeedback
import PushServiceKit
import Testing

/// push-feedback counts each token it removes in the report of the request whose send found it
/// invalid (`request_id` of the event), once however often the event comes.
@Suite(.serialized) struct FeedbackReportTests {
    @Test func aRemovalIsCountedOnceInItsRequestsReport() async throws {
        try await withFeedbackFixture("report") { fixture in
            let dead = fixture.token(1)
            let kept = fixture.token(2)
            _ = try await fixture.register(dead, at: 1_000)
            _ = try await fixture.register(kept, at: 3_000)
            func body(_ token: DeviceToken) -> String {
                let event = FeedbackEvent(
                    app: fixture.app, token: token.hex, reason: "Unregistered", timestamp: 2_000, reportedAt: 9_000, requestID: "req-9")
                return String(decoding: try! JSONEncoder().encode(event), as: UTF8.self)
            }
            try await fixture.runConsumer { _ in
                try await fixture.publishFeedback(body(dead))
                try await fixture.publishFeedback(body(kept))
                _ = try await fixture.removedEvents(count: 1)
                // The same event again, as the broker redelivers it: counted once.
                try await fixture.publishFeedback(body(dead), headers: [DeliverySettler.retriesHeader: .int32(1)])
                _ = try await fixture.removedEvents(count: 1)
            }
            let report = try #require(
                try await RequestReports(redis: fixture.redis, keyPrefix: fixture.keyPrefix).report(app: fixture.app, requestID: "req-9"))
            #expect(report.removed == 1, "the token registered again after the report is kept, not counted")
        }
    }
}
