import Foundation
import Hummingbird
import HummingbirdTesting
import PushCore
import PushIngest
import TestSupport
import Testing

/// `PUT`/`GET`/`DELETE /v1/apps/{app}/devices/{token}` over real HTTP, against the real Redis.
@Suite struct HTTPRegistrationAPITests {
    static let game = HTTPIngestHarness.game

    @Test func putCreatesThenUpdatesAndGetReturnsTheStoredRecord() async throws {
        let harness = try await HTTPIngestHarness.make()
        let token = TestTokens.random()
        try await harness.run { client async throws in
            let body = """
                {"user": "alice", "locale": "zh-Hant-TW", "environment": "production", "topics": ["news", "sports"],
                 "device": {"uuid": "U-1", "name": "Jenna's iPhone", "model": "iPhone15,2", "os_version": "17.5.1", "app_version": "3.2"},
                 "settings": {"alert": true, "badge": false, "sound": true}}
                """
            let created = try await client.put(Self.game, token, json: body)
            #expect(created.status == .created)
            #expect(created.headers[.contentType] == "application/json")
            let record = created.json
            #expect(record["app"] as? String == Self.game)
            #expect(record["token"] as? String == token)
            #expect(record["user"] as? String == "alice")
            #expect(record["locale"] as? String == "zh-Hant-TW")
            #expect(record["environment"] as? String == "production")
            #expect(record["topics"] as? [String] == ["news", "sports"])
            #expect((record["device"] as? [String: Any])?["os_version"] as? String == "17.5.1")
            #expect((record["settings"] as? [String: Any])?["badge"] as? Bool == false)
            let registeredAt = try #require(record["registered_at"] as? Int64)

            // The same PUT again: idempotent, 200, the same record but for updated_at.
            let repeated = try await client.put(Self.game, token, json: body)
            #expect(repeated.status == .ok)
            #expect(repeated.json["registered_at"] as? Int64 == registeredAt)
            #expect(try #require(repeated.json["updated_at"] as? Int64) >= registeredAt)

            let fetched = try await client.get(Self.game, token)
            #expect(fetched.status == .ok)
            #expect(fetched.text == repeated.text)
        }
        await harness.cleanUp()
    }

    @Test func anEmptyBodyTakesTheAppsDefaults() async throws {
        let harness = try await HTTPIngestHarness.make()
        let token = TestTokens.random()
        try await harness.run { client async throws in
            let response = try await client.put(Self.game, token, json: "{}")
            #expect(response.status == .created)
            #expect(response.json["environment"] as? String == "sandbox")
            #expect(response.json["user"] == nil)
            #expect((response.json["settings"] as? [String: Bool]) == ["alert": true, "badge": true, "sound": true])
        }
        await harness.cleanUp()
    }

    @Test func deleteAnswers204AndTheTokenIsGone() async throws {
        let harness = try await HTTPIngestHarness.make()
        let token = TestTokens.random()
        try await harness.run { client async throws in
            #expect(try await client.put(Self.game, token, json: #"{"user": "bob", "topics": ["news"]}"#).status == .created)
            let deleted = try await client.delete(Self.game, token)
            #expect(deleted.status == .noContent)
            #expect(deleted.body.readableBytes == 0)
            let fetched = try await client.get(Self.game, token)
            #expect(fetched.status == .notFound)
            #expect(fetched.json["error"] as? String == "not_found")
            #expect((fetched.json["message"] as? String)?.hasPrefix("token: ") == true)
            // Idempotent: deleting again is still 204.
            #expect(try await client.delete(Self.game, token).status == .noContent)
            #expect(try await harness.tokens(app: Self.game, user: "bob").isEmpty)
        }
        await harness.cleanUp()
    }

    @Test func tokensAreNormalisedFromAnNSDataDescriptionInThePath() async throws {
        let harness = try await HTTPIngestHarness.make()
        let token = TestTokens.random()
        try await harness.run { client async throws in
            let path = HTTPTesting.formEncoded(HTTPTesting.nsDataDescription(token))
            let response = try await client.put(Self.game, path, json: "{}")
            #expect(response.status == .created)
            #expect(response.json["token"] as? String == token)
            #expect(try await client.get(Self.game, token.uppercased()).status == .ok)
        }
        await harness.cleanUp()
    }

    @Test func aTokenReRegisteredUnderAnotherUserMovesBetweenUserSets() async throws {
        let harness = try await HTTPIngestHarness.make()
        let token = TestTokens.random()
        try await harness.run { client async throws in
            #expect(try await client.put(Self.game, token, json: #"{"user": "alice"}"#).status == .created)
            #expect(try await harness.tokens(app: Self.game, user: "alice") == [token])
            #expect(try await client.put(Self.game, token, json: #"{"user": "bob"}"#).status == .ok)
            #expect(try await harness.tokens(app: Self.game, user: "alice").isEmpty)
            #expect(try await harness.tokens(app: Self.game, user: "bob") == [token])
        }
        await harness.cleanUp()
    }

    @Test func concurrentPutsOfOneTokenLeaveItInExactlyTheStoredUsersSet() async throws {
        let harness = try await HTTPIngestHarness.make()
        let token = TestTokens.random()
        let users = (0..<16).map { "user-\($0)" }
        try await harness.run { client async throws in
            try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for user in users {
                    group.addTask { try await client.put(Self.game, token, json: #"{"user": "\#(user)"}"#).status }
                }
                for try await status in group {
                    #expect(status == .created || status == .ok)
                }
            }
            let stored = try #require(try await client.get(Self.game, token).json["user"] as? String)
            for user in users {
                #expect(try await harness.tokens(app: Self.game, user: user) == (user == stored ? [token] : []), "user \(user)")
            }
        }
        await harness.cleanUp()
    }

    // MARK: Authentication and apps

    @Test func noBearerKeyIs401WithWWWAuthenticate() async throws {
        let harness = try await HTTPIngestHarness.make()
        try await harness.run { client async throws in
            for response in [
                try await client.put(Self.game, TestTokens.random(), json: "{}", key: nil),
                try await client.get(Self.game, TestTokens.random(), key: nil),
                try await client.delete(Self.game, TestTokens.random(), key: nil),
            ] {
                #expect(response.status == .unauthorized)
                #expect(response.headers[.wwwAuthenticate] == "Bearer")
                #expect(response.json["error"] as? String == "unauthorized")
                #expect((response.json["message"] as? String)?.hasPrefix("Authorization: ") == true)
            }
            let basic = try await client.client.execute(
                uri: "/v1/apps/\(Self.game)/devices/\(TestTokens.random())",
                method: .get,
                headers: [.authorization: "Basic Z2FtZS1rZXktMTo="]
            )
            #expect(basic.status == .unauthorized)
        }
        await harness.cleanUp()
    }

    @Test func aWrongKeyIs401AndAnotherAppsKeyIs403() async throws {
        let harness = try await HTTPIngestHarness.make()
        try await harness.run { client async throws in
            let wrong = try await client.put(Self.game, TestTokens.random(), json: "{}", key: "game-key-3")
            #expect(wrong.status == .unauthorized, "a key of no app")
            #expect(wrong.json["error"] as? String == "unauthorized")
            let otherApps = try await client.put(Self.game, TestTokens.random(), json: "{}", key: HTTPIngestHarness.shopKey)
            #expect(otherApps.status == .forbidden)
            // An app without API keys refuses every key.
            let keyless = try await client.get(HTTPIngestHarness.quiet, TestTokens.random(), key: HTTPIngestHarness.gameKeys[0])
            #expect(keyless.status == .forbidden)
            // Either of an app's keys works, and only for that app.
            #expect(try await client.put(Self.game, TestTokens.random(), json: "{}", key: HTTPIngestHarness.gameKeys[1]).status == .created)
            #expect(try await client.put(HTTPIngestHarness.shop, TestTokens.random(), json: "{}", key: HTTPIngestHarness.shopKey).status == .created)
        }
        await harness.cleanUp()
    }

    /// The key is checked before the app: without a key of any app the answer is 401 whatever the
    /// path names, and with one it is 403 for another app and for an app that is not configured
    /// alike, so bundle ids cannot be probed.
    @Test func bundleIDsCannotBeProbedWithoutAKey() async throws {
        let harness = try await HTTPIngestHarness.make()
        try await harness.run { client async throws in
            for app in ["com.example.nothere", Self.game] {
                let keyless = try await client.put(app, TestTokens.random(), json: "{}", key: "no-such-key")
                #expect(keyless.status == .unauthorized, "\(app): \(keyless.text)")
                #expect(keyless.json["error"] as? String == "unauthorized")
            }
            let unknown = try await client.put("com.example.nothere", TestTokens.random(), json: "{}", key: HTTPIngestHarness.shopKey)
            let other = try await client.put(Self.game, TestTokens.random(), json: "{}", key: HTTPIngestHarness.shopKey)
            #expect(unknown.status == .forbidden && other.status == .forbidden)
            #expect(unknown.json["error"] as? String == other.json["error"] as? String)
        }
        await harness.cleanUp()
    }

    // MARK: Validation

    /// One bad input of each kind, the `error` it must give and the field the message must start with.
    static let badBodies: [(body: String, error: String, field: String)] = [
        ("not json", "invalid_json", "body"),
        ("[1, 2]", "invalid_json", "body"),
        (#"{"user": 42}"#, "invalid_field", "user"),
        (#"{"user": ""}"#, "invalid_field", "user"),
        (#"{"locale": "zh Hant"}"#, "invalid_field", "locale"),
        (#"{"environment": "staging"}"#, "invalid_field", "environment"),
        (#"{"topics": "news"}"#, "invalid_field", "topics"),
        (#"{"topics": ["news", "two words"]}"#, "invalid_field", "topics[1]"),
        (#"{"device": {"os_version": 17}}"#, "invalid_field", "device.os_version"),
        (#"{"device": {"colour": "red"}}"#, "invalid_field", "device.colour"),
        (#"{"settings": {"alert": 1}}"#, "invalid_field", "settings.alert"),
        (#"{"setings": {}}"#, "invalid_field", "setings"),
    ]

    @Test(arguments: badBodies.indices)
    func aBadBodyIs400NamingTheField(_ index: Int) async throws {
        let (body, error, field) = Self.badBodies[index]
        let harness = try await HTTPIngestHarness.make()
        let token = TestTokens.random()
        try await harness.run { client async throws in
            let response = try await client.put(Self.game, token, json: body)
            #expect(response.status == .badRequest, "\(body)")
            #expect(response.json["error"] as? String == error, "\(body)")
            #expect((response.json["message"] as? String)?.hasPrefix("\(field): ") == true, "\(body): \(response.text)")
            // Nothing was written.
            #expect(try await client.get(Self.game, token).status == .notFound)
        }
        await harness.cleanUp()
    }

    @Test(arguments: [
        "xyz0" + String(repeating: "0", count: 60),  // not hex
        String(repeating: "a", count: 62),  // too short
        String(repeating: "a", count: 202),  // too long
        String(repeating: "a", count: 65),  // odd
    ])
    func aBadTokenIs400(_ token: String) async throws {
        let harness = try await HTTPIngestHarness.make()
        try await harness.run { client async throws in
            for response in [try await client.put(Self.game, token, json: "{}"), try await client.get(Self.game, token)] {
                #expect(response.status == .badRequest)
                #expect(response.json["error"] as? String == "invalid_token")
                #expect((response.json["message"] as? String)?.hasPrefix("token: ") == true)
            }
        }
        await harness.cleanUp()
    }

    @Test func aBodyThatIsNotJSONByItsContentTypeIs415() async throws {
        let harness = try await HTTPIngestHarness.make()
        try await harness.run { client async throws in
            for contentType in ["text/plain", "application/x-www-form-urlencoded", nil] {
                let response = try await client.put(Self.game, TestTokens.random(), json: "{}", contentType: contentType)
                #expect(response.status == .unsupportedMediaType, "\(contentType ?? "none")")
                #expect(response.json["error"] as? String == "unsupported_media_type")
                #expect((response.json["message"] as? String)?.hasPrefix("Content-Type: ") == true)
            }
            let withCharset = try await client.put(Self.game, TestTokens.random(), json: "{}", contentType: "application/json; charset=utf-8")
            #expect(withCharset.status == .created)
        }
        await harness.cleanUp()
    }

    @Test func aBodyOverTheCapIs413() async throws {
        let harness = try await HTTPIngestHarness.make()
        let token = TestTokens.random()
        try await harness.run { client async throws in
            let big = #"{"user": "\#(String(repeating: "x", count: 17 * 1024))"}"#
            let response = try await client.put(Self.game, token, json: big)
            #expect(response.status == .contentTooLarge)
            #expect(response.json["error"] as? String == "body_too_large")
            #expect(try await client.get(Self.game, token).status == .notFound)
        }
        await harness.cleanUp()
    }

    @Test func oversizedHeadersAreRefusedBeforeAnyHandler() async throws {
        let harness = try await HTTPIngestHarness.make()
        try await harness.run { client async throws in
            let request =
                "GET /v1/apps/\(Self.game)/devices/\(TestTokens.random()) HTTP/1.1\r\nHost: localhost\r\n"
                + "X-Padding: \(String(repeating: "p", count: 16 * 1024))\r\n\r\n"
            let (response, _) = try await rawHTTPExchange(port: client.port, request, timeout: .seconds(5))
            #expect(response.hasPrefix("HTTP/1.1 400"), "\(response.prefix(200))")
        }
        await harness.cleanUp()
    }

    @Test func aBodyThatNeverArrivesEndsWithTheRequestTimeout() async throws {
        let harness = try await HTTPIngestHarness.make(ingest: IngestConfiguration(requestTimeout: .seconds(1)))
        try await harness.run { client async throws in
            let request =
                "PUT /v1/apps/\(Self.game)/devices/\(TestTokens.random()) HTTP/1.1\r\nHost: localhost\r\n"
                + "Authorization: Bearer \(HTTPIngestHarness.gameKeys[0])\r\nContent-Type: application/json\r\n"
                + "Content-Length: 100\r\n\r\n{\"user\":"
            let (response, elapsed) = try await rawHTTPExchange(port: client.port, request, timeout: .seconds(10))
            // The client's doing, not the server's: a 4xx (hostile-input catalogue, tests/system/test_hostile.py).
            #expect(response.hasPrefix("HTTP/1.1 408"), "\(response.prefix(300))")
            #expect(response.contains(#""error":"request_timeout","message":"body: did not arrive"#))
            #expect(elapsed < .seconds(4))
        }
        await harness.cleanUp()
    }

    // MARK: Routes

    /// An unknown path is 404; a known path with another method 405 naming the path's methods in
    /// `Allow` (admin routes too, on the shared port), both in the API's JSON shape.
    @Test func unknownRoutesAre404AndOtherMethods405InTheAPIShape() async throws {
        let harness = try await HTTPIngestHarness.make()
        try await harness.run { client async throws in
            let response = try await client.get("/v1/apps")
            #expect(response.status == .notFound)
            #expect(response.json["error"] as? String == "not_found")
            let wrongMethod = try await client.client.execute(uri: "/v1/apps/\(Self.game)/devices/\(TestTokens.random())", method: .post)
            #expect(wrongMethod.status == .methodNotAllowed)
            #expect(wrongMethod.headers[.allow] == "PUT, GET, DELETE")
            #expect(wrongMethod.json["error"] as? String == "method_not_allowed")
            let trace = try await client.client.execute(uri: "/healthz", method: .trace)
            #expect(trace.status == .methodNotAllowed)
            #expect(trace.headers[.allow] == "GET")
            let legacy = try await client.client.execute(uri: "/register?device_token=1", method: .put)
            #expect(legacy.headers[.allow] == "GET, POST")
        }
        await harness.cleanUp()
    }

    @Test func adminRoutesAreServedOnTheSamePort() async throws {
        let harness = try await HTTPIngestHarness.make()
        try await harness.run { client async throws in
            let health = try await client.get("/healthz")
            #expect(health.status == .ok)
            #expect(health.json["status"] as? String == "ok")
            let ready = try await client.get("/readyz")
            #expect(ready.status == .ok)
            #expect(ready.json["status"] as? String == "ready")
            #expect(try await client.get("/metrics").status == .ok)
        }
        await harness.cleanUp()
    }
}
