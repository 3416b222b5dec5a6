import Foundation
import PushCore
import TestSupport
import Testing

/// Live Activity targets of push requests and Live Activity token registrations (issue 13, item 1).
@Suite("Live Activity targets and token registrations")
struct LiveActivityTargetTests {
    static let update = #"{"aps": {"timestamp": 1767225600, "event": "update", "content-state": {"score": "2:1"}}}"#
    static let end = #"{"aps": {"timestamp": 1767225600, "event": "end", "dismissal-date": 1767229200}}"#
    static let start =
        #"{"aps": {"timestamp": 1767225600, "event": "start", "content-state": {"score": "0:0"}, "attributes-type": "MatchAttributes", "attributes": {"home": "A"}, "alert": {"title": "Kick-off", "body": "A v B"}}}"#

    @Test func activityPushToStartAndChannelTargetsDecode() throws {
        let byID = try decodeRequest(requestBody(payload: Self.update, to: #"{"activity": "match-1234"}"#))
        #expect(byID.target == .activity(.id("match-1234")))
        #expect(byID.pushType == .liveactivity, "inferred from the payload")
        #expect(byID.pushType.topic(forBundleID: "com.example.game") == "com.example.game.push-type.liveactivity")
        #expect(try decodeRequest(requestBody(payload: Self.end, to: #"{"activity": {"id": "match-1234"}}"#)).target == .activity(.id("match-1234")))
        #expect(
            try decodeRequest(requestBody(payload: Self.update, to: #"{"activity": {"users": ["alice", "bob", "alice"]}}"#)).target
                == .activity(.users(["alice", "bob"], attributesType: nil)))
        #expect(
            try decodeRequest(requestBody(payload: Self.update, to: #"{"activity": {"users": ["alice"], "attributes_type": "MatchAttributes"}}"#))
                .target
                == .activity(.users(["alice"], attributesType: "MatchAttributes")))
        let start = try decodeRequest(requestBody(payload: Self.start, to: #"{"push_to_start": {"users": ["alice"]}}"#))
        #expect(start.target == .pushToStart(.users(["alice"])))
        #expect(start.attributesType == "MatchAttributes")
        #expect(try decodeRequest(requestBody(payload: Self.start, to: #"{"push_to_start": {"all": true}}"#)).target == .pushToStart(.all))
        #expect(
            try decodeRequest(requestBody(payload: Self.update, to: #"{"channel": "dHN0LXNyY2gtY2hubA=="}"#)).target
                == .channel("dHN0LXNyY2gtY2hubA=="))
    }

    @Test(arguments: [
        // Each target takes only the events its tokens can carry.
        (update, #"{"push_to_start": {"all": true}}"#, "payload.aps.event"),
        (start, #"{"activity": "match-1234"}"#, "payload.aps.event"),
        (start, #"{"channel": "dGVzdA=="}"#, "payload.aps.event"),
        // Only Live Activity pushes go to activity tokens.
        (#"{"aps": {"alert": "hi"}}"#, #"{"activity": "match-1234"}"#, "to.activity"),
        (#"{"aps": {"alert": "hi"}}"#, #"{"push_to_start": {"all": true}}"#, "to.push_to_start"),
        (#"{"aps": {"alert": "hi"}}"#, #"{"channel": "dGVzdA=="}"#, "to.channel"),
        // Device targets take no Live Activity pushes (APNs: DeviceTokenNotForTopic, which would unregister them).
        (update, #"{"users": ["alice"]}"#, "to.users"),
        (update, #"{"topic": "news"}"#, "to.topic"),
        (start, #"{"all": true}"#, "to.all"),
        // Channel ids are APNs' base64; activity ids follow the registration rules.
        (update, #"{"channel": "news!"}"#, "to.channel"),
        (update, #"{"channel": "abc"}"#, "to.channel"),
        (update, #"{"activity": "match 1"}"#, "to.activity"),
        // Shapes.
        (update, #"{"activity": ""}"#, "to.activity"),
        (update, #"{"activity": {"topic": "x"}}"#, "to.activity"),
        (update, #"{"activity": {"id": "a", "users": ["b"]}}"#, "to.activity"),
        (update, #"{"activity": {"users": []}}"#, "to.activity.users"),
        (update, #"{"activity": {"users": [""]}}"#, "to.activity.users[0]"),
        (update, #"{"activity": {"id": "m", "attributes_type": "T"}}"#, "to.activity.attributes_type"),
        (update, #"{"activity": {"users": ["a"], "attributes_type": ""}}"#, "to.activity.attributes_type"),
        (start, #"{"push_to_start": {"all": false}}"#, "to.push_to_start.all"),
        (start, #"{"push_to_start": "MatchAttributes"}"#, "to.push_to_start"),
        (update, #"{"channel": 7}"#, "to.channel"),
        (update, #"{"activity": "a\u0000b"}"#, "to.activity"),
        (update, #"{"lists": ["a"]}"#, "to.lists"),
    ])
    func misfitTargetsAreRefusedNamingTheField(payload: String, target: String, field: String) {
        let error = refusal(requestBody(payload: payload, to: target))
        #expect(error?.field == field, "\(target): \(error?.message ?? "accepted")")
    }

    /// Apple: "Certificate-based authentication is not supported for these APNs pushes."
    @Test func anAppWithACertificateCannotSendLiveActivityPushes() throws {
        let apps = try AppsFile(apps: [
            AppConfiguration(bundleID: "com.example.cert", apns: .pkcs12(certificateFile: "cert.p12", password: "x"))
        ])
        let body = #"{"id": "r", "app": "com.example.cert", "to": {"activity": "m"}, "payload": \#(Self.update)}"#
        do {
            _ = try PushRequest(body: Array(body.utf8), apps: apps)
            Issue.record("accepted")
        } catch {
            #expect(error.field == "push_type")
            #expect(error.message.contains("token-based authentication"))
        }
        let alert = #"{"id": "r", "app": "com.example.cert", "to": {"users": ["a"]}, "payload": {"aps": {"alert": "hi"}}}"#
        #expect(throws: Never.self) { try PushRequest(body: Array(alert.utf8), apps: apps) }
    }

    @Test func anActivityIDLongerThanTheLimitIsRefused() {
        let long = String(repeating: "x", count: PushRequest.maximumActivityFieldLength + 1)
        #expect(refusal(requestBody(payload: Self.update, to: #"{"activity": "\#(long)"}"#))?.field == "to.activity")
        let limit = String(repeating: "x", count: PushRequest.maximumActivityFieldLength)
        #expect(refusal(requestBody(payload: Self.update, to: #"{"activity": "\#(limit)"}"#)) == nil)
    }

    // MARK: Registrations

    static let now: Int64 = 1_767_225_600_000
    static let hex = String(repeating: "8a", count: 32)

    @Test func anUpdateTokenTakesItsDefaultsAndBounds() throws {
        let slot = ActivityTokenSlot.activity(id: "match-1234")
        let plain = try ActivityTokenRegistration(slot: slot, json: ["push_token": "<\(Self.hex.uppercased())>"], now: Self.now)
        #expect(plain.pushToken.hex == Self.hex)
        #expect(plain.expiresAt == Self.now + 12 * 3_600_000, "8 hours of activity and 4 on the Lock Screen")
        #expect(plain.attributesType == nil && plain.user == nil && plain.environment == nil)
        let full = try ActivityTokenRegistration(
            slot: slot,
            json: [
                "push_token": Self.hex, "attributes_type": "MatchAttributes", "expires_at": Int64(1_767_240_000), "user": "alice", "locale": "de-DE",
                "environment": "sandbox",
            ], now: Self.now)
        #expect(full.expiresAt == 1_767_240_000_000)
        #expect(full.attributesType == "MatchAttributes")
        #expect(full.user == "alice" && full.locale == "de-DE" && full.environment == .sandbox)
        #expect(slot.field == "activity:match-1234" && slot.kind == "update")
    }

    @Test func aPushToStartTokenTakesItsTypeFromThePath() throws {
        let slot = ActivityTokenSlot.pushToStart(attributesType: "MatchAttributes")
        let registration = try ActivityTokenRegistration(slot: slot, json: ["push_token": Self.hex], now: Self.now)
        #expect(registration.attributesType == "MatchAttributes")
        #expect(registration.expiresAt == nil, "push-to-start tokens do not expire by time")
        #expect(slot.field == "pts:MatchAttributes" && slot.kind == "push_to_start")
    }

    @Test(
        arguments: [
            ([:], "push_token"),
            (["push_token": 7], "push_token"),
            (["push_token": "xyz"], "push_token"),
            (["push_token": String(repeating: "8a", count: 32), "expires_at": Int64(1_767_225_000)], "expires_at"),
            (["push_token": String(repeating: "8a", count: 32), "expires_at": Int64(1_767_225_600 + 8 * 24 * 3600)], "expires_at"),
            (["push_token": String(repeating: "8a", count: 32), "expires_at": "soon"], "expires_at"),
            (["push_token": String(repeating: "8a", count: 32), "environment": "staging"], "environment"),
            (["push_token": String(repeating: "8a", count: 32), "topics": ["news"]], "topics"),
            (["push_token": String(repeating: "8a", count: 32), "attributes_type": "has space"], "attributes_type"),
            (["push_token": String(repeating: "8a", count: 32), "user": ""], "user"),
        ] as [([String: any Sendable], String)])
    func badUpdateTokenRegistrationsNameTheField(json: [String: any Sendable], field: String) {
        do {
            _ = try ActivityTokenRegistration(slot: .activity(id: "m"), json: json, now: Self.now)
            Issue.record("accepted \(json)")
        } catch {
            #expect(error.field == field, "\(error.message)")
        }
    }

    @Test func aPushToStartTokenRefusesAnExpiryAndAnotherType() {
        let slot = ActivityTokenSlot.pushToStart(attributesType: "MatchAttributes")
        for (json, field) in [
            (["push_token": Self.hex, "expires_at": Int64(1_767_230_000)] as [String: Any], "expires_at"),
            (["push_token": Self.hex, "attributes_type": "OtherAttributes"], "attributes_type"),
        ] {
            do {
                _ = try ActivityTokenRegistration(slot: slot, json: json, now: Self.now)
                Issue.record("accepted \(json)")
            } catch {
                #expect(error.field == field, "\(error.message)")
            }
        }
        #expect(throws: RegistrationError.self) { try ActivityTokenRegistration.name("", field: "activity_id") }
        #expect(throws: RegistrationError.self) { try ActivityTokenRegistration.name(String(repeating: "a", count: 257), field: "activity_id") }
    }

    @Test func aRecordWritesItsJSONWithSortedKeysAndExpiryInSeconds() throws {
        let record = ActivityTokenRecord(
            app: "com.example.game", device: try DeviceToken(normalizing: String(repeating: "0d", count: 32)), slot: .activity(id: "m-1"),
            pushToken: try DeviceToken(normalizing: Self.hex), attributesType: "MatchAttributes", user: "alice", locale: nil,
            environment: .production,
            registeredAt: 1, updatedAt: 2, expiresAt: 1_767_240_000_000)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(record.jsonData())) as? [String: Any])
        #expect(json["activity_id"] as? String == "m-1")
        #expect(json["kind"] as? String == "update")
        #expect(json["expires_at"] as? Int == 1_767_240_000)
        #expect(json["push_token"] as? String == Self.hex)
        #expect(json["locale"] == nil)
        #expect(String(decoding: record.jsonData(), as: UTF8.self).hasPrefix(#"{"activity_id":"m-1","app":"#))
    }
}
