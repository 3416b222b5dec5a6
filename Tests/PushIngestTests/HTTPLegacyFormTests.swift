import Foundation
import Hummingbird
import HummingbirdTesting
import PushCore
import TestSupport
import Testing
import TokenRegistry

@testable import PushIngest

/// The legacy `/register` and `/push_token` forms over real HTTP, against the real Redis.
///
/// Credentials are computed with ``PushIngest/LegacyRegistrationForm/credential(for:mode:secret:)``,
/// whose MD5 and HMAC-SHA256 output is pinned to known values in `HTTPLegacyFormParsingTests`.
@Suite struct HTTPLegacyFormTests {
    static let game = HTTPIngestHarness.game
    static let shop = HTTPIngestHarness.shop

    /// `url` with the credential a client computes: `device_token + device_uuid + timestamp`.
    static func signed(_ url: LegacyRegistrationURL, mode: AppConfiguration.Credential, secret: String = "") -> LegacyRegistrationURL {
        var url = url
        let message = Array((url.deviceToken + url.deviceUUID + url.timestamp).utf8)
        url.credential = String(decoding: LegacyRegistrationForm.credential(for: message, mode: mode, secret: secret), as: UTF8.self)
        return url
    }

    @Test func theURLAShippedAppSendsRegistersWithAnMD5Credential() async throws {
        let harness = try await HTTPIngestHarness.make()
        let token = TestTokens.random()
        try await harness.run { client async throws in
            let url = Self.signed(LegacyRegistrationURL(deviceToken: token), mode: .md5)
            let response = try await client.get(url.path)
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "application/json")
            #expect(response.text == #"{"ret":0,"msg":"ok"}"#)

            let record = try #require(try await harness.record(Self.game, token))
            #expect(record.device.uuid == "6D5A1F3C-2B8E-4E0F-9C57-2E8B3A0D4F11")
            #expect(record.device.name == "Jenna's iPhone")
            #expect(record.device.osVersion == "17.5.1")
            #expect(record.settings == NotificationSettings(alert: true, badge: true, sound: false))
            #expect(record.environment == .sandbox)
            #expect(record.user == nil)
        }
        await harness.cleanUp()
    }

    @Test func theSameURLRegistersWithAnHMACSHA256Credential() async throws {
        let harness = try await HTTPIngestHarness.make()
        let token = TestTokens.random()
        try await harness.run { client async throws in
            var url = LegacyRegistrationURL(deviceToken: token)
            url.appName = "Shop"
            url = Self.signed(url, mode: .hmacSHA256, secret: HTTPIngestHarness.shopSecret)
            let response = try await client.get(url.path)
            #expect(response.text == #"{"ret":0,"msg":"ok"}"#)
            let record = try await harness.record(Self.shop, token)
            #expect(record?.environment == .production)

            // The MD5 of the same message is not an HMAC.
            var md5 = Self.signed(url, mode: .md5)
            md5.appName = "Shop"
            let refused = try await client.get(md5.path)
            #expect(refused.status == .forbidden)
            #expect(refused.json["ret"] as? Int == 2)
        }
        await harness.cleanUp()
    }

    @Test func aPOSTWithAFormBodyRegistersToo() async throws {
        let harness = try await HTTPIngestHarness.make()
        let token = TestTokens.random()
        try await harness.run { client async throws in
            let url = Self.signed(LegacyRegistrationURL(deviceToken: token), mode: .md5)
            let response = try await client.postForm("/register", url.query)
            #expect(response.text == #"{"ret":0,"msg":"ok"}"#)
            // Parameters in the query of a POST work as well.
            let second = Self.signed(LegacyRegistrationURL(deviceToken: TestTokens.random()), mode: .md5)
            let viaQuery = try await client.client.execute(uri: second.path, method: .post)
            #expect(viaQuery.text == #"{"ret":0,"msg":"ok"}"#)
            #expect(try await harness.record(Self.game, token) != nil)
        }
        await harness.cleanUp()
    }

    @Test func anNSDataDescriptionTokenIsNormalisedAndItsCredentialIsOverWhatWasSent() async throws {
        let harness = try await HTTPIngestHarness.make()
        let token = TestTokens.random()
        try await harness.run { client async throws in
            let url = Self.signed(LegacyRegistrationURL(deviceToken: HTTPTesting.nsDataDescription(token)), mode: .md5)
            let response = try await client.get(url.path)
            #expect(response.text == #"{"ret":0,"msg":"ok"}"#)
            #expect(try await harness.record(Self.game, token) != nil)

            // A client that hashed the normalised token while sending the description is accepted too.
            var normalisedHash = LegacyRegistrationURL(deviceToken: token)
            normalisedHash = Self.signed(normalisedHash, mode: .md5)
            normalisedHash.deviceToken = HTTPTesting.nsDataDescription(token)
            #expect(try await client.get(normalisedHash.path).text == #"{"ret":0,"msg":"ok"}"#)
        }
        await harness.cleanUp()
    }

    /// md5 only where an app names it: an app that names no credential checks hmac-sha256, and with
    /// no secret to check it with, refuses the legacy form (issue 18, item 7).
    @Test func anAppThatNamesNoCredentialAndHasNoSecretRefusesTheLegacyForm() async throws {
        let apps = HTTPIngestHarness.standardApps.map { app in
            var app = app
            if app.bundleID == Self.game { app.ingest = AppConfiguration.Ingest(apiKeys: app.ingest.apiKeys) }
            return app
        }
        let harness = try await HTTPIngestHarness.make(apps: apps)
        let token = TestTokens.random()
        try await harness.run { client async throws in
            let response = try await client.get(Self.signed(LegacyRegistrationURL(deviceToken: token), mode: .md5).path)
            #expect(response.status == .forbidden)
            #expect(response.json["ret"] as? Int == 2)
            #expect((response.json["msg"] as? String)?.contains("name ingest.credential") == true, "\(response.text)")
            #expect(try await harness.record(Self.game, token) == nil)
        }
        await harness.cleanUp()
    }

    /// A signed request is accepted once: the same URL replayed within the timestamp window is ret 2
    /// and changes nothing; the app signing again with a new timestamp registers (issue 18, item 7).
    @Test func aReplayedSignedRequestIsRefused() async throws {
        let harness = try await HTTPIngestHarness.make()
        let token = TestTokens.random()
        try await harness.run { client async throws in
            let url = Self.signed(LegacyRegistrationURL(deviceToken: token), mode: .md5)
            #expect(try await client.get(url.path).status == .ok)
            let before = try #require(try await harness.record(Self.game, token))

            let replay = try await client.get(url.path)
            #expect(replay.status == .forbidden)
            #expect(replay.json["ret"] as? Int == 2)
            #expect((replay.json["msg"] as? String)?.hasPrefix("credential: was already used") == true, "\(replay.text)")
            #expect(try await harness.record(Self.game, token)?.updatedAt == before.updatedAt)

            var again = LegacyRegistrationURL(deviceToken: token)
            again.timestamp = String(HTTPTesting.nowMilliseconds() + 1)
            #expect(try await client.get(Self.signed(again, mode: .md5).path).status == .ok)
        }
        await harness.cleanUp()
    }

    /// The credential is claimed in the registry's write: a signed request refused before it (here
    /// the per-client limit, 429) leaves the credential unused, and the client's identical retry
    /// registers once the limit allows; a replay after that is still refused.
    @Test func aSignedRequestRefusedByTheRateLimitCanBeRetriedAsItIs() async throws {
        let harness = try await HTTPIngestHarness.make(ingest: IngestConfiguration(ratePerClient: 1, ratePerApp: 0))
        try await harness.run { client async throws in
            // Spend the client's allowance.
            var status = 200
            for _ in 0..<5 where status != 429 {
                status = Int(try await client.put(Self.game, TestTokens.random(), json: "{}").status.code)
            }
            #expect(status == 429)
            let token = TestTokens.random()
            let url = Self.signed(LegacyRegistrationURL(deviceToken: token), mode: .md5)
            let limited = try await client.get(url.path)
            #expect(limited.status == .tooManyRequests && limited.json["ret"] as? Int == 5, "\(limited.text)")
            #expect(try await harness.record(Self.game, token) == nil)
            try await Task.sleep(for: .milliseconds(1100))
            let retried = try await client.get(url.path)
            #expect(retried.status == .ok, "the identical retry registers: \(retried.text)")
            #expect(try await harness.record(Self.game, token) != nil)
            try await Task.sleep(for: .milliseconds(1100))
            let replay = try await client.get(url.path)
            #expect(replay.status == .forbidden && replay.json["ret"] as? Int == 2, "\(replay.text)")
        }
        await harness.cleanUp()
    }

    @Test func aWrongCredentialIsRet2AndWritesNothing() async throws {
        let harness = try await HTTPIngestHarness.make()
        let token = TestTokens.random()
        try await harness.run { client async throws in
            var url = Self.signed(LegacyRegistrationURL(deviceToken: token), mode: .md5)
            url.deviceUUID = "another-uuid"  // signed over the old one
            let response = try await client.get(url.path)
            #expect(response.status == .forbidden)
            #expect(response.json["ret"] as? Int == 2)
            #expect((response.json["msg"] as? String)?.hasPrefix("credential: ") == true)

            url.credential = ""
            let missing = try await client.get(url.path)
            #expect(missing.json["ret"] as? Int == 2)
            #expect(try await harness.record(Self.game, token) == nil)
        }
        await harness.cleanUp()
    }

    @Test func aStaleTimestampIsRet3() async throws {
        let harness = try await HTTPIngestHarness.make()
        let token = TestTokens.random()
        try await harness.run { client async throws in
            var old = LegacyRegistrationURL(deviceToken: token)
            old.timestamp = String(HTTPTesting.nowMilliseconds() - 301_000)  // the window is 300 s
            let past = try await client.get(Self.signed(old, mode: .md5).path)
            #expect(past.status == .forbidden)
            #expect(past.json["ret"] as? Int == 3)
            #expect((past.json["msg"] as? String)?.hasPrefix("timestamp: ") == true)

            var future = LegacyRegistrationURL(deviceToken: token)
            future.timestamp = String(HTTPTesting.nowMilliseconds() + 3_600_000)
            #expect(try await client.get(Self.signed(future, mode: .md5).path).json["ret"] as? Int == 3)

            var seconds = LegacyRegistrationURL(deviceToken: token)
            seconds.timestamp = String(HTTPTesting.nowMilliseconds() / 1000)
            let inSeconds = try await client.get(Self.signed(seconds, mode: .md5).path)
            #expect((inSeconds.json["msg"] as? String)?.contains("seconds") == true)

            var garbage = LegacyRegistrationURL(deviceToken: token)
            garbage.timestamp = "yesterday"
            let notANumber = try await client.get(Self.signed(garbage, mode: .md5).path)
            #expect(notANumber.status == .badRequest)
            #expect(notANumber.json["ret"] as? Int == 1)
            #expect(try await harness.record(Self.game, token) == nil)
        }
        await harness.cleanUp()
    }

    @Test func anUnknownAppNameFallsBackToTheDefaultApp() async throws {
        let harness = try await HTTPIngestHarness.make()
        let token = TestTokens.random()
        try await harness.run { client async throws in
            var url = LegacyRegistrationURL(deviceToken: token)
            url.appName = "Some Old Name"
            let response = try await client.get(Self.signed(url, mode: .md5).path)
            #expect(response.text == #"{"ret":0,"msg":"ok"}"#)
            #expect(try await harness.record(Self.game, token) != nil)
            // The bundle id works as app_name as well, in any case.
            var byBundleID = LegacyRegistrationURL(deviceToken: TestTokens.random())
            byBundleID.appName = "COM.EXAMPLE.SHOP"
            let shop = Self.signed(byBundleID, mode: .hmacSHA256, secret: HTTPIngestHarness.shopSecret)
            #expect(try await client.get(shop.path).text == #"{"ret":0,"msg":"ok"}"#)
        }
        await harness.cleanUp()
    }

    @Test func withoutADefaultAppAnUnknownAppNameIsRet4() async throws {
        let apps = HTTPIngestHarness.standardApps.map { app in
            var app = app
            app.isDefault = false
            return app
        }
        let harness = try await HTTPIngestHarness.make(apps: apps)
        try await harness.run { client async throws in
            var url = LegacyRegistrationURL(deviceToken: TestTokens.random())
            url.appName = "Some Old Name"
            let response = try await client.get(Self.signed(url, mode: .md5).path)
            #expect(response.status == .notFound)
            #expect(response.json["ret"] as? Int == 4)
            let pushToken = try await client.postForm("/push_token", "username=alice&token=\(TestTokens.random())")
            #expect(pushToken.json["ret"] as? Int == 4)
        }
        await harness.cleanUp()
    }

    @Test func anAppWithCredentialNoneNeedsNoCredentialOrTimestamp() async throws {
        let harness = try await HTTPIngestHarness.make()
        let token = TestTokens.random()
        try await harness.run { client async throws in
            let response = try await client.get("/register?device_token=\(token)&app_name=\(HTTPIngestHarness.quiet)")
            #expect(response.text == #"{"ret":0,"msg":"ok"}"#)
            let record = try await harness.record(HTTPIngestHarness.quiet, token)
            #expect(record?.settings == NotificationSettings())
        }
        await harness.cleanUp()
    }

    @Test(arguments: [
        ("device_token=", "device_token"),
        ("device_token=abc", "device_token"),
        ("device_token=\(String(repeating: "a", count: 64))&push_sound=on", "push_sound"),
        ("device_token=\(String(repeating: "a", count: 64))&push_badge=1", "push_badge"),
        ("device_token=\(String(repeating: "a", count: 64))&device_name=\(String(repeating: "n", count: 300))", "device_name"),
        ("device_token=\(String(repeating: "a", count: 64))&device_uuid=%ZZ", "device_uuid"),
    ])
    func aBadParameterIsRet1NamingIt(_ query: String, _ field: String) async throws {
        let harness = try await HTTPIngestHarness.make()
        try await harness.run { client async throws in
            let response = try await client.get("/register?\(query)&app_name=\(HTTPIngestHarness.quiet)")
            #expect(response.status == .badRequest, "\(query)")
            #expect(response.json["ret"] as? Int == 1)
            #expect((response.json["msg"] as? String)?.hasPrefix("\(field): ") == true, "\(response.text)")
        }
        await harness.cleanUp()
    }

    @Test func aPOSTBodyThatIsNotAFormIsRet1With415() async throws {
        let harness = try await HTTPIngestHarness.make()
        try await harness.run { client async throws in
            let response = try await client.postForm("/register", #"{"device_token": "ab"}"#, contentType: "application/json")
            #expect(response.status == .unsupportedMediaType)
            #expect(response.json["ret"] as? Int == 1)
        }
        await harness.cleanUp()
    }

    /// `/push_token` binds any username to any token with no credential: only an app that enables it
    /// answers, and one username gets a few registrations a minute (issue 18, item 7).
    @Test func pushTokenIsOffUnlessTheAppEnablesItAndLimitedPerUsername() async throws {
        let closed = try await HTTPIngestHarness.make(
            apps: HTTPIngestHarness.standardApps.map { app in
                var app = app
                app.ingest.pushToken = false
                return app
            })
        try await closed.run { client async throws in
            let token = TestTokens.random()
            let refused = try await client.postForm("/push_token", "username=alice&token=\(token)")
            #expect(refused.status == .forbidden)
            #expect(refused.json["ret"] as? Int == 2)
            #expect((refused.json["msg"] as? String)?.contains("ingest.push_token") == true, "\(refused.text)")
            #expect(try await closed.record(Self.game, token) == nil)
        }
        await closed.cleanUp()

        let harness = try await HTTPIngestHarness.make()
        try await harness.run { client async throws in
            for _ in 0..<AppConfiguration.Ingest.pushTokenPerUserPerMinute {
                #expect(try await client.postForm("/push_token", "username=carol&token=\(TestTokens.random())").status == .ok)
            }
            let token = TestTokens.random()
            let limited = try await client.postForm("/push_token", "username=carol&token=\(token)")
            #expect(limited.status == .tooManyRequests)
            #expect(limited.json["ret"] as? Int == 5)
            #expect((limited.json["msg"] as? String)?.hasPrefix("username: ") == true, "\(limited.text)")
            #expect(try await harness.record(Self.game, token) == nil)
            // Another username is not held back.
            #expect(try await client.postForm("/push_token", "username=dan&token=\(token)").status == .ok)
        }
        await harness.cleanUp()
    }

    @Test func pushTokenRegistersForTheDefaultAppWithTheUsername() async throws {
        let harness = try await HTTPIngestHarness.make()
        let token = TestTokens.random()
        try await harness.run { client async throws in
            let response = try await client.postForm(
                "/push_token", "username=alice%40example.com&token=\(HTTPTesting.formEncoded(HTTPTesting.nsDataDescription(token)))")
            #expect(response.status == .ok)
            #expect(response.text == #"{"ret":0,"msg":"ok"}"#)
            let record = try await harness.record(Self.game, token)
            #expect(record?.user == "alice@example.com")
            #expect(try await harness.tokens(app: Self.game, user: "alice@example.com") == [token])

            // The device changes hands: the newest registration wins, and the old user's set lets go.
            #expect(try await client.postForm("/push_token", "username=bob&token=\(token)").text == #"{"ret":0,"msg":"ok"}"#)
            #expect(try await harness.tokens(app: Self.game, user: "alice@example.com").isEmpty)
            #expect(try await harness.tokens(app: Self.game, user: "bob") == [token])
            #expect(try await harness.record(Self.game, token)?.user == "bob")

            let missing = try await client.postForm("/push_token", "username=bob")
            #expect(missing.status == .badRequest)
            #expect(missing.json["msg"] as? String == "token: is required")
        }
        await harness.cleanUp()
    }
}
