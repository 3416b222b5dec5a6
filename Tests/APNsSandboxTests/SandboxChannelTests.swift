import Foundation
import TestSupport
import Testing

/// apns-sandbox's broadcast-channel APIs as a provider uses them: the built executable, TLS and
/// HTTP/2 through curl, the admin API over HTTP/1.1. Paths, headers, statuses and reasons as Apple's
/// "Sending channel management requests to APNs", "Sending broadcast push notification requests to
/// APNs" and their error table give them.
@Suite("apns-sandbox broadcast channels")
struct SandboxChannelTests {
    static let app = "com.example.app"
    static let channelsPath = "/1/apps/\(app)/channels"
    static let broadcastPath = "/4/broadcasts/apps/\(app)"
    static let payload = #"{"aps":{"timestamp":1685952000,"event":"update","content-state":{"score":"2-1"}}}"#

    static func auth() -> [(String, String)] { [("authorization", SandboxProcess.bearer())] }

    static func createBody(policy: Int = 0) -> String { #"{"message-storage-policy": \#(policy), "push-type": "LiveActivity"}"# }

    /// Creates a channel through the management API; its id.
    static func create(_ sandbox: SandboxProcess, policy: Int = 0, app: String = app) async throws -> String {
        let created = try await sandbox.push(path: "/1/apps/\(app)/channels", headers: auth(), body: createBody(policy: policy))
        #expect(created.status == 201, "\(created)")
        return try #require(created.headers["apns-channel-id"], "\(created)")
    }

    static func broadcastHeaders(_ channel: String, priority: String = "10", expiration: String = "0") -> [(String, String)] {
        auth() + [("apns-channel-id", channel), ("apns-push-type", "liveactivity"), ("apns-priority", priority), ("apns-expiration", expiration)]
    }

    /// `+`, `/` and `=` of a base64 id, escaped for a query.
    static func query(_ channel: String) -> String {
        channel.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }

    @Test func createReadListDeleteAnswerAsApplesPages() async throws {
        let sandbox = try await SandboxProcess()
        let requestID = "2288cf3f-70d8-46a6-97d7-dd5d00867127"

        let created = try await sandbox.push(
            path: Self.channelsPath, headers: Self.auth() + [("apns-request-id", requestID)], body: Self.createBody(policy: 0))
        #expect(created.status == 201, "\(created)")
        #expect(created.headers["apns-request-id"] == requestID)
        #expect(created.body.isEmpty)
        let first = try #require(created.headers["apns-channel-id"])
        #expect(Data(base64Encoded: first)?.count == 16, "a base64 id: \(first)")
        let second = try await Self.create(sandbox, policy: 1)
        #expect(second != first)

        // Without apns-request-id, APNs makes one up and returns it.
        let read = try await sandbox.push(path: Self.channelsPath, method: "GET", headers: Self.auth() + [("apns-channel-id", second)], body: nil)
        #expect(read.status == 200, "\(read)")
        #expect(UUID(uuidString: read.headers["apns-request-id"] ?? "") != nil, "\(read)")
        #expect(number(read.json?["message-storage-policy"]) == 1)
        #expect(read.json?["push-type"] as? String == "LiveActivity")
        let readFirst = try await sandbox.push(path: Self.channelsPath, method: "GET", headers: Self.auth() + [("apns-channel-id", first)], body: nil)
        #expect(number(readFirst.json?["message-storage-policy"]) == 0, "\(readFirst)")

        let listed = try await sandbox.push(path: "/1/apps/\(Self.app)/all-channels", method: "GET", headers: Self.auth(), body: nil)
        #expect(listed.status == 200, "\(listed)")
        #expect(listed.json?["channels"] as? [String] == [first, second])

        // The admin API shows them.
        let admin = try #require(try await sandbox.admin("GET", "/channels").json?["channels"] as? [[String: Any]])
        #expect(admin.map { $0["channel"] as? String } == [first, second])
        #expect(admin.map { number($0["message_storage_policy"]) } == [0, 1])
        #expect(admin.allSatisfy { $0["app"] as? String == Self.app && $0["push_type"] as? String == "LiveActivity" })

        let deleted = try await sandbox.push(
            path: Self.channelsPath, method: "DELETE", headers: Self.auth() + [("apns-channel-id", first)], body: nil)
        #expect(deleted.status == 204, "\(deleted)")
        #expect(deleted.body.isEmpty)
        #expect(deleted.headers["apns-request-id"] != nil)
        for method in ["GET", "DELETE"] {
            let gone = try await sandbox.push(path: Self.channelsPath, method: method, headers: Self.auth() + [("apns-channel-id", first)], body: nil)
            #expect(gone.status == 400 && gone.reason == "ChannelNotRegistered", "\(method): \(gone)")
        }
        let afterDelete = try await sandbox.push(path: "/1/apps/\(Self.app)/all-channels", method: "GET", headers: Self.auth(), body: nil)
        #expect(afterDelete.json?["channels"] as? [String] == [second])

        // Channels belong to their app.
        let otherApp = try await sandbox.push(path: "/1/apps/com.example.other/all-channels", method: "GET", headers: Self.auth(), body: nil)
        #expect(otherApp.json?["channels"] as? [String] == [], "\(otherApp)")
        let notTheirs = try await sandbox.push(
            path: "/1/apps/com.example.other/channels", method: "GET", headers: Self.auth() + [("apns-channel-id", second)], body: nil)
        #expect(notTheirs.reason == "ChannelNotRegistered", "\(notTheirs)")

        // Management requests count apart: `delivered` stays the notifications' count.
        let stats = try #require(try await sandbox.admin("GET", "/stats").json)
        #expect(number(stats["delivered"]) == 0)
        #expect(number(stats["channel_requests"]) == 11)
        #expect(number((stats["channel_by_status"] as? [String: Any])?["201"]) == 2)
        #expect(number((stats["channel_by_reason"] as? [String: Any])?["ChannelNotRegistered"]) == 3)
    }

    @Test func aBroadcastIsOneRequestRecordedWithItsChannel() async throws {
        let sandbox = try await SandboxProcess()
        let channel = try await Self.create(sandbox, policy: 1)
        let requestID = "eabeae54-14a8-11e5-b60b-1697f925ec7b"
        let expiration = String(Int(Date().timeIntervalSince1970) + 3600)
        let sent = try await sandbox.push(
            path: Self.broadcastPath,
            headers: Self.broadcastHeaders(channel, priority: "5", expiration: expiration) + [("apns-request-id", requestID)],
            body: Self.payload)
        #expect(sent.status == 200, "\(sent)")
        #expect(sent.headers["apns-request-id"] == requestID)
        #expect(sent.body.isEmpty)
        // A device notification beside it, to tell the two apart.
        #expect(try await sandbox.push().status == 200)

        let recorded = try #require(
            try await sandbox.admin("GET", "/deliveries?channel=\(Self.query(channel))").json?["deliveries"] as? [[String: Any]])
        #expect(recorded.count == 1)
        let broadcast = try #require(recorded.first)
        #expect(broadcast["channel"] as? String == channel)
        #expect(broadcast["token"] is NSNull)
        #expect(broadcast["topic"] as? String == Self.app)
        let headers = try #require(broadcast["headers"] as? [String: String])
        #expect(headers["apns-channel-id"] == channel)
        #expect(headers["apns-push-type"] == "liveactivity")
        #expect(headers["apns-priority"] == "5")
        #expect(headers["apns-expiration"] == expiration)
        #expect(headers["authorization"] == nil)
        #expect(((broadcast["payload"] as? [String: Any])?["aps"] as? [String: Any])?["event"] as? String == "update")

        let all = try #require(try await sandbox.admin("GET", "/deliveries?app=\(Self.app)").json?["deliveries"] as? [[String: Any]])
        #expect(all.count == 2)
        #expect(all.last?["channel"] is NSNull)
        #expect(all.last?["token"] as? String == SandboxProcess.token)
        let byToken = try await sandbox.admin("GET", "/deliveries?token=\(SandboxProcess.token)").json?["deliveries"] as? [[String: Any]]
        #expect(byToken?.count == 1)

        let channels = try #require(try await sandbox.admin("GET", "/channels?app=\(Self.app)").json?["channels"] as? [[String: Any]])
        #expect(number(channels.first?["broadcasts"]) == 1)
        let stats = try #require(try await sandbox.admin("GET", "/stats").json)
        #expect(number(stats["delivered"]) == 2)

        // Apple's pages spell the push type three ways; all are accepted. A Most Recent Message
        // Stored channel takes a nonzero expiration, and a broadcast may leave out priority (10).
        for pushType in ["LiveActivity", "Liveactivity"] {
            let spelled = try await sandbox.push(
                path: Self.broadcastPath,
                headers: Self.auth() + [("apns-channel-id", channel), ("apns-push-type", pushType), ("apns-expiration", "0")], body: Self.payload)
            #expect(spelled.status == 200, "\(pushType): \(spelled)")
        }
        #expect(number(try await sandbox.admin("GET", "/stats").json?["delivered"]) == 4)
        // Low priority, which Apple's broadcast page names beside medium and high.
        let low = try await sandbox.push(path: Self.broadcastPath, headers: Self.broadcastHeaders(channel, priority: "1"), body: Self.payload)
        #expect(low.status == 200, "\(low)")
    }

    @Test func eachDocumentedRefusalHasApplesStatusAndReason() async throws {
        let sandbox = try await SandboxProcess()
        let quiet = try await Self.create(sandbox, policy: 0)
        let stored = try await Self.create(sandbox, policy: 1)
        let unknown = Data(repeating: 7, count: 16).base64EncodedString()
        let auth = Self.auth()
        let channels = Self.channelsPath
        let broadcast = Self.broadcastPath
        typealias Case = (name: String, method: String, path: String, headers: [(String, String)], body: String?, status: Int, reason: String)
        let cases: [Case] = [
            // Management
            ("no provider token", "POST", channels, [], Self.createBody(), 403, "MissingProviderToken"),
            ("bad provider token", "POST", channels, [("authorization", "bearer x.y.z")], Self.createBody(), 403, "InvalidProviderToken"),
            ("unknown path", "GET", "/1/apps/\(Self.app)/channel", auth, nil, 404, "BadPath"),
            ("no bundle id", "GET", "/1/apps//channels", auth, nil, 404, "BadPath"),
            ("PUT on channels", "PUT", channels, auth, Self.createBody(), 405, "MethodNotAllowed"),
            ("POST on all-channels", "POST", "/1/apps/\(Self.app)/all-channels", auth, Self.createBody(), 405, "MethodNotAllowed"),
            ("push-type suffix", "GET", "/1/apps/\(Self.app).push-type.liveactivity/all-channels", auth, nil, 400, "TopicDisallowed"),
            ("request id not a UUID", "POST", channels, auth + [("apns-request-id", "123")], Self.createBody(), 400, "BadMessageId"),
            ("body not JSON", "POST", channels, auth, "policy=0", 400, "BadRequestPayload"),
            ("no body", "POST", channels, auth, nil, 400, "BadRequestPayload"),
            (
                "unknown attribute", "POST", channels, auth, #"{"message-storage-policy":0,"push-type":"LiveActivity","name":"final"}"#, 400,
                "BadRequestParams"
            ),
            ("storage policy 2", "POST", channels, auth, Self.createBody(policy: 2), 400, "BadRequestParams"),
            ("storage policy true", "POST", channels, auth, #"{"message-storage-policy":true,"push-type":"LiveActivity"}"#, 400, "BadRequestParams"),
            ("no storage policy", "POST", channels, auth, #"{"push-type":"LiveActivity"}"#, 400, "BadRequestParams"),
            ("no push-type", "POST", channels, auth, #"{"message-storage-policy":0}"#, 400, "MissingPushType"),
            ("push-type alert", "POST", channels, auth, #"{"message-storage-policy":0,"push-type":"alert"}"#, 400, "InvalidPushType"),
            ("read without a channel id", "GET", channels, auth, nil, 400, "MissingChannelId"),
            ("delete a malformed channel id", "DELETE", channels, auth + [("apns-channel-id", "not base64!")], nil, 400, "BadChannelId"),
            ("read an unknown channel", "GET", channels, auth + [("apns-channel-id", unknown)], nil, 400, "ChannelNotRegistered"),
            // Broadcasts
            (
                "broadcast without a provider token", "POST", broadcast, Self.broadcastHeaders(quiet).filter { $0.0 != "authorization" },
                Self.payload, 403,
                "MissingProviderToken"
            ),
            ("broadcast on an unknown channel", "POST", broadcast, Self.broadcastHeaders(unknown), Self.payload, 400, "ChannelNotRegistered"),
            (
                "broadcast on another app's path", "POST", "/4/broadcasts/apps/com.example.other", Self.broadcastHeaders(quiet), Self.payload, 400,
                "ChannelNotRegistered"
            ),
            ("broadcast without a channel", "POST", broadcast, auth + [("apns-push-type", "liveactivity")], Self.payload, 400, "MissingChannelId"),
            ("broadcast on a malformed channel id", "POST", broadcast, Self.broadcastHeaders("abc"), Self.payload, 400, "BadChannelId"),
            ("broadcast without a push type", "POST", broadcast, auth + [("apns-channel-id", quiet)], Self.payload, 400, "MissingPushType"),
            (
                "broadcast as alert", "POST", broadcast, auth + [("apns-channel-id", quiet), ("apns-push-type", "alert")], Self.payload, 400,
                "InvalidPushType"
            ),
            ("priority 7", "POST", broadcast, Self.broadcastHeaders(quiet, priority: "7"), Self.payload, 400, "BadPriority"),
            ("expiration not a number", "POST", broadcast, Self.broadcastHeaders(stored, expiration: "soon"), Self.payload, 400, "BadExpirationDate"),
            (
                "broadcast without an expiration", "POST", broadcast,
                auth + [("apns-channel-id", stored), ("apns-push-type", "liveactivity"), ("apns-priority", "10")], Self.payload, 400,
                "BadExpirationDate"
            ),
            (
                "expiration on a No Message Stored channel", "POST", broadcast, Self.broadcastHeaders(quiet, expiration: "1767225600"), Self.payload,
                400,
                "BadExpirationDate"
            ),
            ("empty payload", "POST", broadcast, Self.broadcastHeaders(quiet), nil, 400, "PayloadEmpty"),
            ("payload not JSON", "POST", broadcast, Self.broadcastHeaders(quiet), "update", 400, "BadRequestPayload"),
            (
                "payload over 5120 bytes", "POST", broadcast, Self.broadcastHeaders(quiet), #"{"a":"\#(String(repeating: "x", count: 5113))"}"#, 413,
                "PayloadTooLarge"
            ),
            ("apns-id not a UUID", "POST", broadcast, Self.broadcastHeaders(quiet) + [("apns-id", "42")], Self.payload, 400, "BadMessageId"),
            ("GET on broadcasts", "GET", broadcast, Self.broadcastHeaders(quiet), nil, 405, "MethodNotAllowed"),
            (
                "broadcast with a push-type suffix", "POST", broadcast + ".push-type.liveactivity", Self.broadcastHeaders(quiet), Self.payload, 400,
                "TopicDisallowed"
            ),
        ]
        for entry in cases {
            let result = try await sandbox.push(path: entry.path, method: entry.method, headers: entry.headers, body: entry.body)
            #expect(result.status == entry.status, "\(entry.name): \(result)")
            #expect(result.reason == entry.reason, "\(entry.name): \(result)")
            #expect(UUID(uuidString: result.headers["apns-request-id"] ?? "") != nil, "\(entry.name): \(result)")
        }
        // The boundary: exactly 5120 bytes is accepted.
        let largest = #"{"a":"\#(String(repeating: "x", count: 5112))"}"#
        #expect(largest.utf8.count == 5120)
        let accepted = try await sandbox.push(path: broadcast, headers: Self.broadcastHeaders(quiet), body: largest)
        #expect(accepted.status == 200, "\(accepted)")
        // Nothing refused was recorded.
        let recorded = try #require(try await sandbox.admin("GET", "/deliveries").json?["deliveries"] as? [[String: Any]])
        #expect(recorded.count == 1)
    }

    @Test func creationStopsAtTheChannelLimit() async throws {
        let sandbox = try await SandboxProcess(arguments: ["--channel-limit", "2"])
        let first = try await Self.create(sandbox)
        _ = try await Self.create(sandbox)
        let refused = try await sandbox.push(path: Self.channelsPath, headers: Self.auth(), body: Self.createBody())
        #expect(refused.status == 400, "\(refused)")
        #expect(refused.reason == "CannotCreateChannelConfig")
        // The limit is per app, and deleting makes room.
        _ = try await Self.create(sandbox, app: "com.example.other")
        let deleted = try await sandbox.push(
            path: Self.channelsPath, method: "DELETE", headers: Self.auth() + [("apns-channel-id", first)], body: nil)
        #expect(deleted.status == 204, "\(deleted)")
        _ = try await Self.create(sandbox)
        // Admin DELETE /channels forgets them all.
        #expect(number(try await sandbox.admin("DELETE", "/channels").json?["deleted"]) == 3)
        #expect((try await sandbox.admin("GET", "/channels").json?["channels"] as? [Any])?.isEmpty == true)
    }

    @Test func injectedStatusFaultsApplyToBroadcastsNotToManagement() async throws {
        let sandbox = try await SandboxProcess()
        let channel = try await Self.create(sandbox)
        #expect(try await sandbox.admin("PUT", "/faults", body: #"{"status":503,"rate":1}"#).status == 200)
        let refused = try await sandbox.push(path: Self.broadcastPath, headers: Self.broadcastHeaders(channel), body: Self.payload)
        #expect(refused.status == 503, "\(refused)")
        #expect(refused.reason == "ServiceUnavailable")
        let listed = try await sandbox.push(path: "/1/apps/\(Self.app)/all-channels", method: "GET", headers: Self.auth(), body: nil)
        #expect(listed.status == 200, "\(listed)")
        #expect(try await sandbox.admin("DELETE", "/faults").status == 200)
        let sent = try await sandbox.push(path: Self.broadcastPath, headers: Self.broadcastHeaders(channel), body: Self.payload)
        #expect(sent.status == 200, "\(sent)")
    }
}
