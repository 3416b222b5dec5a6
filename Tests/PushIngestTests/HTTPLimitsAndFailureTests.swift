import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import PushCore
import PushIngest
import PushServiceKit
import Redis
import TestSupport
import Testing

/// Rate limits (real GCRA in the real Redis), Redis going away and coming back (a private Redis of
/// this suite's own, stopped and restarted), and reading the configuration.
@Suite struct HTTPLimitsAndFailureTests {
    static let game = HTTPIngestHarness.game

    /// Sends `request` until it is refused with 429 (at most 20 times: the limits in these tests allow 2
    /// a second, so only a request that took half a second each could miss), and returns that answer.
    static func untilLimited(_ request: () async throws -> TestResponse) async throws -> TestResponse {
        var last: TestResponse?
        for _ in 0..<20 {
            let response = try await request()
            if response.status == .tooManyRequests { return response }
            last = response
        }
        Issue.record("never answered 429; last answer \(last.map { "\($0.status) \($0.text)" } ?? "none")")
        return try #require(last)
    }

    @Test func theClientLimitAnswers429WithRetryAfterOnceSpent() async throws {
        let harness = try await HTTPIngestHarness.make(ingest: IngestConfiguration(ratePerClient: 2, ratePerApp: 0))
        try await harness.run { client async throws in
            // A burst of one second's worth (2) is allowed whatever the timing; then requests are refused.
            for _ in 0..<2 {
                #expect(try await client.put(Self.game, TestTokens.random(), json: "{}").status == .created)
            }
            let refused = try await Self.untilLimited { try await client.put(Self.game, TestTokens.random(), json: "{}") }
            #expect(refused.json["error"] as? String == "rate_limited")
            #expect(refused.headers[.retryAfter] == "1")

            // The legacy forms share the client's allowance and answer ret 5 with the same status.
            let legacy = try await Self.untilLimited {
                try await client.get("/register?device_token=\(TestTokens.random())&app_name=\(HTTPIngestHarness.quiet)")
            }
            #expect(legacy.json["ret"] as? Int == 5)
            #expect(legacy.headers[.retryAfter] == "1")

            // Refused requests count too: keys cannot be guessed without limit.
            let guessing = try await Self.untilLimited { try await client.put(Self.game, TestTokens.random(), json: "{}", key: "guess") }
            #expect(guessing.json["error"] as? String == "rate_limited")

            // The allowance comes back with time.
            try await Task.sleep(for: .milliseconds(1100))
            #expect(try await client.put(Self.game, TestTokens.random(), json: "{}").status == .created)
        }
        await harness.cleanUp()
    }

    /// Behind a trusted proxy each forwarded client has its own bucket; anyone else's
    /// X-Forwarded-For is ignored, so nobody picks their bucket (issue 18, item 7).
    @Test func xForwardedForCountsOnlyFromATrustedProxy() async throws {
        func limitedPerForwardedClient(trusting proxies: String) async throws -> (first: Int, other: Int) {
            var ingest = IngestConfiguration(ratePerClient: 2, ratePerApp: 0)
            ingest.trustedProxies = try #require(TrustedProxies(parsing: proxies))
            let harness = try await HTTPIngestHarness.make(ingest: ingest)
            let statuses = try await harness.run { client async throws -> (Int, Int) in
                let forwarded = { (address: String) -> HTTPFields in [HTTPField.Name("X-Forwarded-For")!: "198.51.100.9, \(address)"] }
                // Spend the first forwarded client's allowance …
                var first = 200
                for _ in 0..<20 where first != 429 {
                    first = Int(
                        try await client.get(
                            "/register?device_token=\(TestTokens.random())&app_name=\(HTTPIngestHarness.quiet)",
                            headers: forwarded("203.0.113.7")
                        ).status.code)
                }
                // … then see whether another forwarded client still has its own.
                let other = try await client.get(
                    "/register?device_token=\(TestTokens.random())&app_name=\(HTTPIngestHarness.quiet)",
                    headers: forwarded("203.0.113.8"))
                return (first, Int(other.status.code))
            }
            await harness.cleanUp()
            return statuses
        }
        let trusted = try await limitedPerForwardedClient(trusting: "127.0.0.0/8, ::1")
        #expect(trusted.first == 429 && trusted.other == 200, "behind a trusted proxy: one bucket per client, got \(trusted)")
        let untrusted = try await limitedPerForwardedClient(trusting: "")
        #expect(untrusted.first == 429 && untrusted.other == 429, "an untrusted peer's header is ignored, got \(untrusted)")
    }

    @Test func theAppLimitIsPerApp() async throws {
        let harness = try await HTTPIngestHarness.make(ingest: IngestConfiguration(ratePerClient: 0, ratePerApp: 2))
        try await harness.run { client async throws in
            for _ in 0..<2 {
                #expect(try await client.put(Self.game, TestTokens.random(), json: "{}").status == .created)
            }
            let refused = try await Self.untilLimited { try await client.put(Self.game, TestTokens.random(), json: "{}") }
            #expect(refused.headers[.retryAfter] != nil)
            // Another app has its own allowance.
            let shop = try await client.put(HTTPIngestHarness.shop, TestTokens.random(), json: "{}", key: HTTPIngestHarness.shopKey)
            #expect(shop.status == .created)
        }
        await harness.cleanUp()
    }

    /// New tokens have a budget a minute per app (apps file) and per client address: made-up tokens
    /// with the app's key are refused (429, naming the budget) once it is spent, while tokens the
    /// registry holds still update.
    @Test func newTokensHaveABudgetPerAppAndPerClient() async throws {
        let apps = HTTPIngestHarness.standardApps.map { app in
            var app = app
            if app.bundleID == Self.game { app.ingest.newTokensPerMinute = 20 }
            return app
        }
        let harness = try await HTTPIngestHarness.make(
            apps: apps, ingest: IngestConfiguration(ratePerClient: 0, ratePerApp: 0, newTokensPerClientPerMinute: 30))
        try await harness.run { client async throws in
            var accepted = 0
            var refusal: TestResponse?
            let known = TestTokens.random()
            #expect(try await client.put(Self.game, known, json: "{}").status == .created)
            accepted += 1
            for _ in 0..<40 {
                let response = try await client.put(Self.game, TestTokens.random(), json: "{}")
                if response.status == .created {
                    accepted += 1
                } else {
                    refusal = response
                    break
                }
            }
            print("new-token budget of 20 a minute: \(accepted) new tokens accepted before the first refusal")
            #expect(accepted == 20, "the app's budget")
            let refused = try #require(refusal)
            #expect(refused.status == .tooManyRequests && refused.headers[.retryAfter] != nil)
            #expect((refused.json["message"] as? String ?? "").contains("ingest.new_tokens_per_minute"), "\(refused.text)")
            #expect(try await client.put(Self.game, known, json: #"{"user": "alice"}"#).status == .ok, "a known token still updates")
            // A Live Activity token for a device the registry does not hold is charged too; for a
            // known device it is not.
            let madeUp = TestTokens.random()
            let activity = try await client.client.execute(
                uri: "/v1/apps/\(Self.game)/devices/\(madeUp)/push-to-start/MatchAttributes", method: .put,
                headers: [.authorization: "Bearer \(HTTPIngestHarness.gameKeys[0])", .contentType: "application/json"],
                body: ByteBuffer(string: #"{"push_token": "\#(TestTokens.random())"}"#))
            #expect(activity.status == .tooManyRequests, "a made-up device's activity token: \(activity.status)")
            let knownActivity = try await client.client.execute(
                uri: "/v1/apps/\(Self.game)/devices/\(known)/push-to-start/MatchAttributes", method: .put,
                headers: [.authorization: "Bearer \(HTTPIngestHarness.gameKeys[0])", .contentType: "application/json"],
                body: ByteBuffer(string: #"{"push_token": "\#(TestTokens.random())"}"#))
            #expect(knownActivity.status == .created, "a known device's activity token: \(knownActivity.status)")
            // The client's own budget (30) over both apps: what the game spent counts, so the shop
            // gets the rest and then a refusal naming the client's budget.
            var shopAccepted = 0
            var clientRefusal: TestResponse?
            for _ in 0..<30 {
                let response = try await client.put(HTTPIngestHarness.shop, TestTokens.random(), json: "{}", key: HTTPIngestHarness.shopKey)
                guard response.status == .created else {
                    clientRefusal = response
                    break
                }
                shopAccepted += 1
            }
            #expect((1..<15).contains(shopAccepted), "the client address's budget, after the game's: \(shopAccepted)")
            #expect(
                (clientRefusal?.json["message"] as? String ?? "").contains("PUSH_INGEST_NEW_TOKENS_PER_CLIENT_PER_MINUTE"),
                "\(clientRefusal?.text ?? "no refusal")")
        }
        await harness.cleanUp()
    }

    /// A request head sent a byte at a time is cut off at the header deadline (counted from its first
    /// byte), while a connection that sends nothing stays open as keep-alive connections do and a
    /// normal request on it is answered.
    @Test func aSlowRequestHeadIsCutOffAtTheHeaderDeadline() async throws {
        var ingest = IngestConfiguration()
        ingest.headerTimeout = .seconds(1)
        let harness = try await HTTPIngestHarness.make(ingest: ingest)
        try await harness.run { client async throws in
            let port = client.port
            let head = "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + String(repeating: "a", count: 200) + "\r\n\r\n"
            let cutOff = try await slowRequestHead(port: port, head, interval: .milliseconds(100), bound: .seconds(6))
            let open = try #require(cutOff, "the server kept the slow connection open for 6 s")
            #expect(open >= .milliseconds(900) && open < .seconds(3), "closed after \(open)")
            // Quiet for 2 s (beyond the header deadline), then a whole request: answered.
            let late = try await delayedHTTPExchange(port: port, after: .seconds(2), "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            #expect(late.hasPrefix("HTTP/1.1 200"), "\(late)")
        }
        await harness.cleanUp()
    }

    /// A Redis at its maxmemory with noeviction (as every shipped deployment runs it) refuses
    /// writes (the rate limits' too): registrations are 503 saying the registry is full, not 500, and
    /// work again once there is room.
    @Test func aFullRedisAnswers503SayingSo() async throws {
        let server = TestRedis.full
        try await server.start()
        let harness = try await HTTPIngestHarness.make(redisURL: server.url)
        do {
            try await harness.run { client async throws in
                let token = TestTokens.random()
                #expect(try await client.put(Self.game, token, json: "{}").status == .created)
                _ = try await harness.redis.execute("CONFIG", "SET", "maxmemory-policy", "noeviction")
                _ = try await harness.redis.execute("CONFIG", "SET", "maxmemory", "1")
                let refused = try await client.put(Self.game, TestTokens.random(), json: "{}")
                #expect(refused.status == .serviceUnavailable, "\(refused.text)")
                #expect((refused.json["message"] as? String ?? "").contains("the registry is full"), "\(refused.text)")
                _ = try await harness.redis.execute("CONFIG", "SET", "maxmemory", "0")
                #expect(try await client.put(Self.game, TestTokens.random(), json: "{}").status == .created, "room again")
                #expect(try await client.get(Self.game, token).status == .ok)
            }
        } catch {
            await harness.cleanUp()
            try? await server.stop()
            throw error
        }
        await harness.cleanUp()
        try await server.stop()
    }

    @Test func redisStoppedAnswers503WithinTheTimeoutAndRecoversAfterRestart() async throws {
        let server = TestRedis.outage
        try await server.start()
        do {
            let harness = try await HTTPIngestHarness.make(redisURL: server.url)
            try await harness.run { client async throws in
                let token = TestTokens.random()
                #expect(try await client.put(Self.game, token, json: #"{"user": "alice"}"#).status == .created)

                try await server.stop()
                for request in ["put", "get", "register"] {
                    let start = ContinuousClock.now
                    let response: TestResponse
                    switch request {
                    case "put": response = try await client.put(Self.game, token, json: #"{"user": "bob"}"#)
                    case "get": response = try await client.get(Self.game, token)
                    default: response = try await client.get("/register?device_token=\(token)&app_name=\(HTTPIngestHarness.quiet)")
                    }
                    let elapsed = ContinuousClock.now - start
                    #expect(response.status == .serviceUnavailable, "\(request): \(response.text)")
                    #expect(!response.text.contains("127.0.0.1"), "answers never show the infrastructure: \(response.text)")
                    if request == "register" {
                        #expect(response.json["ret"] as? Int == 6)
                    } else {
                        #expect(response.json["error"] as? String == "unavailable")
                    }
                    // The Redis command timeout is 2 s (plus a connect attempt while it is down).
                    #expect(elapsed < .milliseconds(4500), "\(request) took \(elapsed)")
                }
                let ready = try await client.get("/readyz")
                #expect(ready.status == .serviceUnavailable)

                try await server.start()
                var status: HTTPResponse.Status = .serviceUnavailable
                let deadline = ContinuousClock.now + .seconds(20)
                while status == .serviceUnavailable, ContinuousClock.now < deadline {
                    status = try await client.put(Self.game, token, json: #"{"user": "bob"}"#).status
                    if status == .serviceUnavailable { try await Task.sleep(for: .milliseconds(200)) }
                }
                #expect(status == .ok)  // the record written before the outage survived (AOF)
                #expect(try await client.get(Self.game, token).json["user"] as? String == "bob")
            }
            await harness.cleanUp()
        } catch {
            try? await server.stop()
            throw error
        }
        try await server.stop()
    }

    @Test func configurationIsReadFromTheEnvironmentWithDefaults() async throws {
        let defaults = try IngestConfiguration(reader: await PushConfigurationReader.load(environment: [:]))
        #expect(defaults == IngestConfiguration())
        let reader = try await PushConfigurationReader.load(environment: [
            "PUSH_INGEST_RATE_PER_CLIENT": "10", "PUSH_INGEST_RATE_PER_APP": "0", "PUSH_INGEST_MAX_BODY_BYTES": "4096",
            "PUSH_INGEST_REQUEST_TIMEOUT_S": "2.5", "PUSH_INGEST_IDLE_TIMEOUT_S": "30", "PUSH_INGEST_MAX_CONNECTIONS": "100",
        ])
        let configuration = try IngestConfiguration(reader: reader)
        #expect(configuration.ratePerClient == 10)
        #expect(configuration.ratePerApp == 0)
        #expect(configuration.maxBodySize == 4096)
        #expect(configuration.requestTimeout == .milliseconds(2500))
        #expect(configuration.idleTimeout == .seconds(30))
        #expect(configuration.maxConnections == 100)
        #expect(reader.unknownKeys(known: PushConfiguration.keys.union(IngestConfiguration.keys)).isEmpty)

        let bad = try await PushConfigurationReader.load(environment: ["PUSH_INGEST_RATE_PER_APP": "lots"])
        let error = #expect(throws: ConfigurationError.self) { try IngestConfiguration(reader: bad) }
        #expect(error?.message.hasPrefix("PUSH_INGEST_RATE_PER_APP: ") == true)
    }
}
