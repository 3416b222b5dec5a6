import AMQP
import Foundation
import PushCore
import PushSend
import TestSupport
import Testing

/// push-send sending broadcast batches (a channel target) to apns-sandbox (issue 13, item 2).
@Suite("push-send: broadcasts on channels", .timeLimit(.minutes(2)))
struct SendBroadcastTests {
    static let payload = #"{"aps":{"timestamp":1767225600,"event":"update","content-state":{"score":"2:1"}}}"#

    func broadcast(_ fixture: SendServiceFixture, channel: String, requestID: String = UUID().uuidString, priority: Int = 10) -> SendBatch {
        SendBatch(
            requestID: requestID, batchID: "\(requestID)/1", app: fixture.app, environment: .production, pushType: "liveactivity", priority: priority,
            payload: Self.payload, tokens: [], createdAt: Int64(Date().timeIntervalSince1970 * 1000), channel: channel)
    }

    @Test func aBroadcastIsOneRequestOnItsChannelReportedOnceAndNotRepeatedOnRedelivery() async throws {
        try await withSendService("broadcast") { fixture in
            let created = try await fixture.sandbox.push(
                path: "/1/apps/\(fixture.app)/channels", headers: [("authorization", SandboxProcess.bearer())],
                body: #"{"message-storage-policy": 0, "push-type": "LiveActivity"}"#)
            let channel = try #require(created.headers["apns-channel-id"], "\(created)")
            let batch = broadcast(fixture, channel: channel)
            try await fixture.run { _ in
                try await fixture.publish(batch)
                let events = try await fixture.events(1)
                #expect(events.map(\.routingKey) == ["delivered"])
                #expect(events.first?.channel == channel && events.first?.count == 1 && events.first?.batchID == batch.batchID)
                // The same batch again, as after a crash before the ack: reported, not broadcast twice.
                try await fixture.publish(batch)
                #expect(try await fixture.events(1).map(\.routingKey) == ["delivered"])
            }
            let deliveries = try #require(
                try await fixture.sandbox.admin("GET", "/deliveries?channel=\(channel)").json?["deliveries"] as? [[String: Any]])
            #expect(deliveries.count == 1, "one request, however many devices listen")
            let headers = deliveries.first?["headers"] as? [String: Any]
            #expect(headers?["apns-push-type"] as? String == "liveactivity")
            #expect(headers?["apns-channel-id"] as? String == channel)
            #expect((headers?["apns-request-id"] as? String)?.count == 36, "a request id derived from the batch id")
            #expect(try await fixture.messages(in: fixture.names.dead) == 0)
        }
    }

    /// An app without the Broadcast capability (APNs answers `BroadcastFeatureNotEnabled`, its
    /// spelling of the table's `FeatureNotEnabled`): its broadcasts pause, its pushes to devices do not.
    @Test func aMissingBroadcastCapabilityPausesOnlyTheAppsBroadcasts() async throws {
        try await withSendService("broadcast-feature") { fixture in
            let created = try await fixture.sandbox.push(
                path: "/1/apps/\(fixture.app)/channels", headers: [("authorization", SandboxProcess.bearer())],
                body: #"{"message-storage-policy": 0, "push-type": "LiveActivity"}"#)
            let channel = try #require(created.headers["apns-channel-id"], "\(created)")
            try await fixture.setFault(#"{"broadcast_feature_not_enabled": true}"#)
            try await fixture.run { _ in
                try await fixture.publish(broadcast(fixture, channel: channel))
                try await eventually("APNs refused the broadcast") {
                    let byReason = try await fixture.stats()["by_reason"] as? [String: Any]
                    return number(byReason?["BroadcastFeatureNotEnabled"]) == 1
                }
                // A push to a device of the same app still goes out.
                try await fixture.publish(fixture.batch([TestTokens.random()]))
                let events = try await fixture.events(1)
                #expect(events.map(\.routingKey) == ["delivered"] && events.first?.channel == nil, "\(events.map(\.routingKey))")
                // The broadcast came back from its retry tier (1 s) and waited: APNs was not asked again.
                try await Task.sleep(for: .milliseconds(2500))
                let byReason = try await fixture.stats()["by_reason"] as? [String: Any]
                #expect(number(byReason?["BroadcastFeatureNotEnabled"]) == 1, "\(String(describing: byReason))")
            }
        }
    }

    @Test func aBroadcastOnAnUnknownChannelFailsWithApplesReasonAndIsNotRetried() async throws {
        try await withSendService("broadcast-unknown") { fixture in
            try await fixture.run { _ in
                try await fixture.publish(broadcast(fixture, channel: "dW5rbm93bi1jaGFubmVs"))
                let events = try await fixture.events(1)
                #expect(events.map(\.routingKey) == ["failed.ChannelNotRegistered"])
                #expect(events.first?.channel == "dW5rbm93bi1jaGFubmVs")
            }
            #expect(try await fixture.messages(in: fixture.names.send.name) == 0)
            #expect(try await fixture.messages(in: fixture.names.dead) == 0)
        }
    }

    @Test(arguments: [
        (#"{"channel": "dGVzdA==", "tokens": ["\#(String(repeating: "ab", count: 32))"]}"#, "tokens"),
        (#"{"channel": "dGVzdA==", "push_type": "alert"}"#, "push_type"),
        (#"{"channel": "dGVzdA==", "priority": 7}"#, "priority"),
        (#"{"channel": ""}"#, "channel"),
        (#"{"channel": "news!"}"#, "channel"),
    ])
    func aMalformedBroadcastBatchIsRefusedNamingTheField(override: String, field: String) throws {
        var object: [String: Any] = [
            "v": 1, "request_id": "r", "batch_id": "r/1", "app": "com.example.game", "environment": "production", "push_type": "liveactivity",
            "priority": 10, "payload": Self.payload, "tokens": [String](), "attempt": 0, "created_at": 1,
        ]
        let overrides = try #require(try JSONSerialization.jsonObject(with: Data(override.utf8)) as? [String: Any])
        for (key, value) in overrides { object[key] = value }
        let body = Array(try JSONSerialization.data(withJSONObject: object))
        do {
            _ = try DecodedSendBatch(body: body)
            Issue.record("accepted \(override)")
        } catch {
            #expect(error.field == field, "\(error.message)")
        }
    }
}
