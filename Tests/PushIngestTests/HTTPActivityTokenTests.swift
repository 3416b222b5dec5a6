import Foundation
import Hummingbird
import HummingbirdTesting
import PushCore
import PushIngest
import Redis
import TestSupport
import Testing
import TokenRegistry

/// `PUT`/`GET`/`DELETE /v1/apps/{app}/devices/{token}/push-to-start/{type}` and `…/activities/{id}`
/// over real HTTP, against the real Redis (issue 13, item 1).
@Suite struct HTTPActivityTokenTests {
    static let game = HTTPIngestHarness.game

    func request(
        _ client: HTTPIngestClient, _ method: HTTPRequest.Method, _ path: String, json: String? = nil, key: String? = HTTPIngestHarness.gameKeys[0]
    ) async throws -> TestResponse {
        var headers: HTTPFields = [:]
        if let key { headers[.authorization] = "Bearer \(key)" }
        if json != nil { headers[.contentType] = "application/json" }
        return try await client.client.execute(uri: path, method: method, headers: headers, body: json.map { ByteBuffer(string: $0) })
    }

    @Test func aPushToStartTokenIsStoredBesideTheDeviceReadAndDeleted() async throws {
        let harness = try await HTTPIngestHarness.make()
        let device = TestTokens.random()
        let pushToken = TestTokens.random()
        try await harness.run { client async throws in
            #expect(
                try await client.put(Self.game, device, json: #"{"user": "alice", "locale": "de-DE", "environment": "production"}"#).status
                    == .created)
            let path = "/v1/apps/\(Self.game)/devices/\(device)/push-to-start/MatchAttributes"
            let created = try await request(client, .put, path, json: #"{"push_token": "\#(pushToken)"}"#)
            #expect(created.status == .created)
            #expect(created.json["kind"] as? String == "push_to_start")
            #expect(created.json["attributes_type"] as? String == "MatchAttributes")
            #expect(created.json["device"] as? String == device)
            #expect(created.json["user"] as? String == "alice", "from the device's record")
            #expect(created.json["locale"] as? String == "de-DE")
            #expect(created.json["environment"] as? String == "production")
            let again = try await request(client, .put, path, json: #"{"push_token": "\#(pushToken)"}"#)
            #expect(again.status == .ok, "the same token again: updated")
            let fetched = try await request(client, .get, path)
            #expect(fetched.status == .ok)
            #expect(fetched.json["push_token"] as? String == pushToken)
            #expect(try await request(client, .delete, path).status == .noContent)
            #expect(try await request(client, .get, path).status == .notFound)
            #expect(try await request(client, .delete, path).status == .noContent, "idempotent")
        }
        await harness.cleanUp()
    }

    @Test func anActivitysUpdateTokenTakesAnEncodedIDAndAnExpiry() async throws {
        let harness = try await HTTPIngestHarness.make()
        let device = TestTokens.random()
        let pushToken = TestTokens.random()
        let expiresAt = Int64(Date().timeIntervalSince1970) + 3600
        try await harness.run { client async throws in
            let path = "/v1/apps/\(Self.game)/devices/\(device)/activities/match%2F1234"
            let created = try await request(
                client, .put, path, json: #"{"push_token": "\#(pushToken)", "attributes_type": "MatchAttributes", "expires_at": \#(expiresAt)}"#)
            #expect(created.status == .created, "\(created.text)")
            #expect(created.json["activity_id"] as? String == "match/1234")
            #expect(created.json["expires_at"] as? Int64 == expiresAt)
            #expect(created.json["environment"] as? String == "sandbox", "the app's, with no device record")
            let ttl = try #require(
                try await harness.redis.execute(
                    "TTL",
                    try await harness.registry.keys(app: Self.game, device: try DeviceToken(normalizing: device)).activityRecord(
                        try DeviceToken(normalizing: pushToken))
                ).integer)
            #expect(ttl > 3500 && ttl <= 3600)
        }
        await harness.cleanUp()
    }

    @Test func badActivityTokenRequestsAreRefusedNamingTheField() async throws {
        let harness = try await HTTPIngestHarness.make()
        let device = TestTokens.random()
        try await harness.run { client async throws in
            let base = "/v1/apps/\(Self.game)/devices/\(device)"
            let cases: [(String, String?, String?, Int, String)] = [
                ("\(base)/push-to-start/MatchAttributes", "{}", HTTPIngestHarness.gameKeys[0], 400, "push_token"),
                ("\(base)/push-to-start/MatchAttributes", #"{"push_token": "zz"}"#, HTTPIngestHarness.gameKeys[0], 400, "push_token"),
                (
                    "\(base)/push-to-start/MatchAttributes", #"{"push_token": "\#(device)", "expires_at": 2000000000}"#,
                    HTTPIngestHarness.gameKeys[0], 400, "expires_at"
                ),
                ("\(base)/activities/m", #"{"push_token": "\#(device)", "expires_at": 1}"#, HTTPIngestHarness.gameKeys[0], 400, "expires_at"),
                ("\(base)/activities/has%20space", #"{"push_token": "\#(device)"}"#, HTTPIngestHarness.gameKeys[0], 400, "activity_id"),
                ("\(base)/activities/m", #"{"push_token": "\#(device)"}"#, nil, 401, "Authorization"),
                (
                    "/v1/apps/com.example.unknown/devices/\(device)/activities/m", #"{"push_token": "\#(device)"}"#, HTTPIngestHarness.gameKeys[0],
                    403, "Authorization"
                ),
            ]
            for (path, body, key, status, field) in cases {
                let response = try await request(client, .put, path, json: body, key: key)
                #expect(response.status.code == status, "\(path) \(body ?? ""): \(response.text)")
                #expect((response.json["message"] as? String)?.hasPrefix(field) == true, "\(path): \(response.text)")
            }
        }
        await harness.cleanUp()
    }
}
