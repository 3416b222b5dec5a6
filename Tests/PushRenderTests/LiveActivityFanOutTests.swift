import AMQP
import Foundation
import PushCore
import TestSupport
import Testing
import TokenRegistry

@testable import PushRender

/// push-render reaching Live Activity tokens (issue 13, item 1), against real RabbitMQ and Redis.
@Suite("push-render: Live Activity targets", .timeLimit(.minutes(2)))
struct LiveActivityFanOutTests {
    @Test func pushToStartReachesEachUsersTokenOfThePayloadsTypeAndActivityReachesItsUpdateTokens() async throws {
        try await withRenderFixture("activity") { fixture in
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let registry = fixture.registry
            // alice has two devices (one in production, German); bob one; carol's token is for another type.
            let devices = (1...4).map { fixture.token($0, prefix: "de71ce") }
            for (device, user, locale, environment) in [
                (devices[0], "alice", "de-DE", AppConfiguration.Environment.production), (devices[1], "alice", "en-US", .sandbox),
                (devices[2], "bob", "en-US", .sandbox), (devices[3], "carol", "en-US", .sandbox),
            ] {
                try await fixture.register(device, DeviceRegistration(user: user, locale: locale, environment: environment))
            }
            let starts = (1...4).map { fixture.token($0, prefix: "57a27") }
            for (index, device) in devices.enumerated() {
                let type = index == 3 ? "OtherAttributes" : "MatchAttributes"
                _ = try await registry.upsertActivityToken(
                    app: fixture.app, device: device,
                    registration: ActivityTokenRegistration(slot: .pushToStart(attributesType: type), pushToken: starts[index]),
                    defaultEnvironment: .sandbox, now: now)
            }
            let updates = (1...2).map { fixture.token($0, prefix: "0bda7e") }
            for (index, device) in devices.prefix(2).enumerated() {
                _ = try await registry.upsertActivityToken(
                    app: fixture.app, device: device,
                    registration: ActivityTokenRegistration(
                        slot: .activity(id: "match-1234"), pushToken: updates[index], attributesType: "MatchAttributes", expiresAt: now + 3_600_000),
                    defaultEnvironment: .sandbox, now: now)
            }
            let start =
                #"{"aps": {"timestamp": 1767225600, "event": "start", "content-state": {"score": "0:0"}, "attributes-type": "MatchAttributes", "attributes": {"home": "A"}, "alert": {"title": "Kick-off", "body": "A v B"}}}"#
            let update = #"{"aps": {"timestamp": 1767225700, "event": "update", "content-state": {"score": "1:0"}, "stale-date": 1767229300}}"#
            try await fixture.run { _ in
                try await fixture.publish(
                    #"{"id": "pts-1", "app": "\#(fixture.app)", "to": {"push_to_start": {"users": ["alice", "carol"]}}, "payload": \#(start)}"#)
                try await fixture.publish(
                    #"{"id": "pts-all", "app": "\#(fixture.app)", "to": {"push_to_start": {"all": true}}, "payload": \#(start)}"#)
                try await fixture.publish(#"{"id": "upd-1", "app": "\#(fixture.app)", "to": {"activity": "match-1234"}, "payload": \#(update)}"#)
                try await fixture.publish(
                    #"{"id": "upd-users", "app": "\#(fixture.app)", "to": {"activity": {"users": ["alice", "bob"]}}, "payload": \#(update)}"#)
                try await fixture.publish(
                    #"{"id": "upd-typed", "app": "\#(fixture.app)", "to": {"activity": {"users": ["alice"], "attributes_type": "OtherAttributes"}}, "payload": \#(update)}"#
                )
                try await fixture.publish(
                    #"{"id": "upd-match", "app": "\#(fixture.app)", "to": {"activity": {"users": ["alice"], "attributes_type": "MatchAttributes"}}, "payload": \#(update)}"#
                )
                // Listed tokens of a Live Activity push are read from their activity records.
                try await fixture.publish(
                    #"{"id": "upd-listed", "app": "\#(fixture.app)", "to": {"tokens": ["\#(updates[0].hex)"]}, "payload": \#(update)}"#)
                for id in ["pts-1", "pts-all", "upd-1", "upd-users", "upd-typed", "upd-match", "upd-listed"] { try await fixture.waitUntilDone(id) }
            }
            let batches = try await fixture.drainBatches()
            func tokens(_ request: String) -> Set<String> { Set(batches.filter { $0.requestID == request }.flatMap(\.tokens)) }
            #expect(
                tokens("pts-1") == Set(starts.prefix(2).map(\.hex)), "alice's push-to-start tokens of MatchAttributes; carol's is of another type")
            #expect(tokens("pts-all") == Set(starts.prefix(3).map(\.hex)), "every MatchAttributes push-to-start token")
            #expect(tokens("upd-1") == Set(updates.map(\.hex)))
            #expect(tokens("upd-users") == Set(updates.map(\.hex)), "bob has no activity running")
            #expect(tokens("upd-typed").isEmpty, "alice's activities are of MatchAttributes")
            #expect(tokens("upd-match") == Set(updates.map(\.hex)))
            let listed = batches.filter { $0.requestID == "upd-listed" }
            #expect(listed.map(\.environment) == [.production], "the activity token's own environment, not the app's (sandbox)")
            #expect(batches.allSatisfy { $0.pushType == "liveactivity" })
            let production = batches.filter { $0.requestID == "upd-1" && $0.environment == .production }.flatMap(\.tokens)
            #expect(production == [updates[0].hex], "each token goes to its device's environment")
            #expect(try await fixture.progress("pts-1")["skipped"] == "0", "another type's token is not a skipped device")
        }
    }

    /// A channel target is one broadcast batch, however many devices listen, rendered once.
    @Test func aChannelRequestIsOneBroadcastBatch() async throws {
        try await withRenderFixture("activity-channel") { fixture in
            let update = #"{"aps": {"timestamp": 1767225700, "event": "update", "content-state": {"score": "1:0"}}}"#
            try await fixture.run { _ in
                try await fixture.publish(#"{"id": "ch-1", "app": "\#(fixture.app)", "to": {"channel": "dHN0LWNobmw="}, "payload": \#(update)}"#)
                try await fixture.waitUntilDone("ch-1")
            }
            let batches = try await fixture.drainBatches()
            #expect(batches.count == 1)
            let batch = try #require(batches.first)
            #expect(batch.channel == "dHN0LWNobmw=")
            #expect(batch.tokens.isEmpty)
            #expect(batch.pushType == "liveactivity")
            #expect(batch.environment == .sandbox, "the app's environment")
            #expect(batch.payload.contains(#""content-state":{"score":"1:0"}"#))
            #expect(try await fixture.progress("ch-1")["sequence"] == "1")
        }
    }
}
