import Foundation
import PushCore
import TestSupport
import Testing

/// The push request and invalid-token report examples producers read (docs/examples/), through the
/// decoders push-render and push-feedback use: every valid one accepted, every invalid one refused
/// naming the field its file name starts with.
@Suite struct ContractExamplesTests {
    @Test func everyPushRequestExampleIsDecodedAsItSays() throws {
        let result = try ContractExamples.disagreements("push-requests") { body throws(PushRequestError) in
            _ = try PushRequest(body: body, apps: renderTestApps())
        }
        #expect(result.valid >= 5 && result.invalid >= 5)
        #expect(result.problems.isEmpty, "\(result.problems)")
    }

    @Test func everyInvalidTokenReportExampleIsDecodedAsItSays() throws {
        let result = try ContractExamples.disagreements("feedback-events") { body throws(FeedbackError) in
            _ = try InvalidTokenReport(feedbackBody: body)
        }
        #expect(result.valid >= 2 && result.invalid >= 2)
        #expect(result.problems.isEmpty, "\(result.problems)")
    }

    /// The outcome event examples are what push-send and push-feedback publish, byte for byte as JSON
    /// values: each is built here the way the services build it and compared.
    @Test func theOutcomeEventExamplesAreWhatTheServicesPublish() throws {
        let token = "740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad"
        let built: [String: PushEvent] = [
            "delivered.json": .delivered(
                app: "com.example.game", requestID: "order-4711-shipped", batchID: "order-4711-shipped/0", count: 498, at: 1_767_225_601_234),
            "failed.json": .failed(
                app: "com.example.game", requestID: "order-4711-shipped", batchID: "order-4711-shipped/0", reason: "Unregistered",
                tokens: [token, String(repeating: "0f", count: 32)], at: 1_767_225_601_234),
            "token.removed.json": .tokenRemoved(app: "com.example.game", token: token, reason: "Unregistered", at: 1_767_225_602_000),
            "broadcast-delivered.json": .broadcastDelivered(
                app: "com.example.game", requestID: "match-42-end", batchID: "match-42-end/0", channel: "dHJpdmlhLW1hdGNoLTQy",
                at: 1_767_231_000_500),
        ]
        let examples = try ContractExamples.examples("outcome-events", valid: true)
        #expect(Set(examples.map(\.name)) == Set(built.keys), "every example is built here, and every kind of event has an example")
        for example in examples {
            guard let event = built[example.name] else { continue }
            let encoded = try JSONSerialization.jsonObject(with: JSONEncoder().encode(event)) as? NSDictionary
            let written = try JSONSerialization.jsonObject(with: Data(example.body)) as? NSDictionary
            #expect(encoded != nil && encoded == written, "\(example.name): the services publish \(String(describing: encoded))")
            #expect(try JSONDecoder().decode(PushEvent.self, from: Data(example.body)) == event)
        }
    }
}
