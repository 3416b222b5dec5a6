import Foundation
import PushCore
import PushSend
import PushServiceKit
import Testing

/// push-send counts every settled batch in its request's report (``PushServiceKit/RequestReports``),
/// and a redelivered copy of a batch replaces its count instead of adding to it.
@Suite(.serialized) struct SendReportTests {
    @Test func aBatchIsCountedOnceInItsReportEvenWhenItIsDeliveredAgain() async throws {
        try await withSendService("report") { fixture in
            let tokens = SendServiceFixture.tokens(40)
            let bad = Array(tokens.suffix(5))
            for token in bad { try await fixture.setToken(token, #"{"state": "bad"}"#) }
            let batch = fixture.batch(tokens, requestID: "report-1", sequence: 1)
            let reports = RequestReports(redis: fixture.redis)
            try await fixture.run { _ in
                try await fixture.publish(batch)
                _ = try await fixture.events(2)
                let first = try #require(try await reports.report(app: fixture.app, requestID: "report-1"))
                #expect(first.delivered == 35)
                #expect(first.failed == ["BadDeviceToken": 5])
                #expect(first.firstDeliveryAt != nil && first.firstDeliveryAt == first.lastDeliveryAt)

                // The same batch again, as after a crash before its ack: the sandbox gets nothing new,
                // and the report counts the batch once.
                try await fixture.publish(batch)
                _ = try await fixture.events(2)
                let again = try #require(try await reports.report(app: fixture.app, requestID: "report-1"))
                #expect(again.delivered == 35)
                #expect(again.failed == ["BadDeviceToken": 5])
                #expect(try await fixture.acceptedCount() == 35, "the report agrees with what the sandbox accepted")
            }
        }
    }
}
