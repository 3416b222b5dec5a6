import AMQP
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import PushCore
import PushRender
import PushServiceKit
import Redis
import TestSupport
import Testing
import TokenRegistry

@testable import PushConsole

/// push-console's application as `main` builds it (``PushConsole/buildConsoleApplication``), against
/// the test RabbitMQ and Redis with a queue and key prefix of its own: logins, CSRF, the pages, the
/// JSON API with a bearer key, publishing, dead letters and tokens.
@Suite(.serialized) struct ConsoleHTTPTests {
    static let logger = TestLogger.make("push-console-tests")
    static let password = "correct horse battery"
    static let apiKey = String(repeating: "a1", count: 20)

    struct Harness: Sendable {
        let client: any TestClientProtocol
        let backend: ConsoleBackend
        let sessions: ConsoleSessions
        var redis: any RedisCommandExecutor { backend.redis }
        let app: String
        /// A second app, when the test asked for one.
        let otherApp: String
        let names: PushQueues
        let tokens: [String]

        func get(_ path: String, cookie: String? = nil, bearer: String? = nil) async throws -> TestResponse {
            var headers: HTTPFields = [:]
            if let cookie { headers[.cookie] = "push_console_session=\(cookie)" }
            if let bearer { headers[.authorization] = "Bearer \(bearer)" }
            return try await client.execute(uri: path, method: .get, headers: headers, body: nil)
        }

        func post(_ path: String, form: [String: String], cookie: String?) async throws -> TestResponse {
            var headers: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
            if let cookie { headers[.cookie] = "push_console_session=\(cookie)" }
            let body = form.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }.joined(separator: "&")
            return try await client.execute(uri: path, method: .post, headers: headers, body: ByteBuffer(string: body))
        }

        func api(
            _ method: HTTPRequest.Method, _ path: String, json: String? = nil, key: String = ConsoleHTTPTests.apiKey
        ) async throws -> (status: HTTPResponse.Status, json: [String: Any]) {
            let response = try await client.execute(
                uri: path, method: method, headers: [.authorization: "Bearer \(key)", .contentType: "application/json"],
                body: json.map { ByteBuffer(string: $0) })
            return (response.status, (try? JSONSerialization.jsonObject(with: Data(response.body.readableBytesView))) as? [String: Any] ?? [:])
        }

        /// Logs in; the session cookie and the page's CSRF token.
        func login(_ name: String = "alice") async throws -> (cookie: String, csrf: String) {
            let response = try await post("/login", form: ["name": name, "password": ConsoleHTTPTests.password], cookie: nil)
            #expect(response.status == .seeOther)
            let setCookie = try #require(response.headers[.setCookie])
            #expect(setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict"))
            let cookie = String(setCookie.split(separator: ";")[0].dropFirst("push_console_session=".count))
            let page = String(buffer: try await get(try #require(response.headers[.location]), cookie: cookie).body)
            let csrf = try #require(page.firstMatch(of: /name="csrf" value="([0-9a-f]{64})"/)?.1)
            return (cookie, String(csrf))
        }
    }

    /// The operators file of most tests: alice and the bot, without scopes (so admins).
    static var defaultOperators: String {
        #"{"operators": [{"name": "alice", "password": "\#(PasswordHash.make(password: Self.password, rounds: 100_000).encoded)"}], "api_keys": [{"name": "bot", "key_sha256": "\#(OperatorCredentials.keyDigestHex(Self.apiKey))"}]}"#
    }

    func withConsole(
        operators: String = ConsoleHTTPTests.defaultOperators, otherApp: String? = nil, trustedProxies: String = "",
        sessionKeys: SessionKeys = .ephemeral(), logger: Logger = ConsoleHTTPTests.logger, testing: TestingSetup = .router,
        requestTimeout: Duration = .seconds(10),
        _ body: @Sendable (Harness) async throws -> Void
    ) async throws {
        let names = PushQueues(prefix: TestServers.uniqueName("console"))
        let prefix = TestServers.uniqueName("test-console")
        let app = TestServers.uniqueName("com.test.console")
        let apps = try AppsFile(
            apps: ([app] + (otherApp.map { [$0] } ?? [])).map { bundleID in
                AppConfiguration(
                    bundleID: bundleID, apns: .token(.init(keyFile: "/nonexistent/AuthKey.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ")))
            })
        let catalogs = try LocalizationCatalogs.load(directory: TestServers.packageRoot.appendingPathComponent("localization").path)
        let redis = try await TestServers.connectRedis(logger: Self.logger)
        let amqp = AMQPConnection(
            configuration: try AMQPConfiguration(url: TestServers.amqpURL, connectionName: "push-console-tests"), topology: .push(names),
            logger: Self.logger)
        try await withCleanUp {
            try await amqp.waitUntilConnected(timeout: .seconds(15))
            let backend = ConsoleBackend(
                amqp: amqp, redis: redis, apps: apps, catalogs: catalogs, queues: names, keyPrefix: prefix, logger: Self.logger)
            let registry = TokenRegistry(redis: redis, keyPrefix: prefix)
            var tokens: [String] = []
            for (index, locale) in ["en", "de", "zh-Hant-TW"].enumerated() {
                let token = TestTokens.random()
                tokens.append(token)
                _ = try await registry.upsert(
                    app: app, token: try DeviceToken(normalizing: token),
                    registration: DeviceRegistration(user: "user\(index)", locale: locale, topics: ["news"]), defaultEnvironment: .production,
                    now: Int64(Date().timeIntervalSince1970 * 1000))
            }
            let credentials = try OperatorCredentials.parse(
                Array(operators.replacingOccurrences(of: "$APP", with: app).replacingOccurrences(of: "$OTHER", with: otherApp ?? "").utf8))
            var console = ConsoleConfiguration(operatorsFile: "unused")
            console.trustedProxies = try #require(TrustedProxies(parsing: trustedProxies))
            console.requestTimeout = requestTimeout
            let sessions = ConsoleSessions(redis: redis, keyPrefix: prefix, ttl: .seconds(600), keys: sessionKeys)
            let application = try buildConsoleApplication(
                configuration: PushConfiguration(httpPort: 0, httpHost: "127.0.0.1"), console: console, credentials: credentials,
                backend: backend, sessions: sessions, logger: logger)
            let registered = tokens
            let other = otherApp ?? ""
            try await application.test(testing) { client in
                try await body(
                    Harness(client: client, backend: backend, sessions: sessions, app: app, otherApp: other, names: names, tokens: registered))
            }
        } cleanUp: {
            for queue in names.allQueueNames { _ = try? await amqp.deleteQueue(queue) }
            await amqp.close()
            _ = try? await redis.deleteKeys(matching: "\(prefix)*")
            await redis.close()
        }
    }

    @Test func pagesNeedALoginAndAWrongPasswordIsRefused() async throws {
        try await withConsole { harness in
            for path in ["/requests", "/compose", "/dead", "/status", "/tokens", "/"] {
                let response = try await harness.get(path)
                #expect(response.status == .seeOther && response.headers[.location] == "/login", "\(path)")
            }
            #expect(try await harness.get("/api/v1/status").status == .unauthorized)
            #expect(try await harness.get("/api/v1/status", bearer: "wrong").status == .unauthorized)
            #expect(try await harness.get("/requests", cookie: String(repeating: "0", count: 64)).status == .seeOther, "an unknown session")
            let wrong = try await harness.post("/login", form: ["name": "alice", "password": "nope"], cookie: nil)
            #expect(wrong.status == .unauthorized)
            #expect(String(buffer: wrong.body).contains(#"id="error""#))
            #expect(try await harness.get("/healthz").status == .ok, "health needs no login")
            let (cookie, csrf) = try await harness.login()
            let page = String(buffer: try await harness.get("/requests", cookie: cookie).body)
            #expect(page.contains(#"<span id="operator">alice</span>"#))
            // A form without the session's CSRF token changes nothing.
            #expect(try await harness.post("/logout", form: [:], cookie: cookie).status == .forbidden)
            #expect(try await harness.post("/logout", form: ["csrf": csrf], cookie: cookie).status == .seeOther)
            #expect(try await harness.get("/requests", cookie: cookie).status == .seeOther, "logged out")
        }
    }

    @Test func sessionsNeedTheirCSRFTokenForChangesAndAKnownOperator() async throws {
        try await withConsole { harness in
            let (cookie, csrf) = try await harness.login()
            let body = #"{"id": "csrf-1", "app": "\#(harness.app)", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}}"#
            for path in ["/api/v1/requests", "//api/v1/requests", "/api//v1/requests"] {
                let refused = try await harness.client.execute(
                    uri: path, method: .post, headers: [.cookie: "push_console_session=\(cookie)", .contentType: "application/json"],
                    body: ByteBuffer(string: body))
                #expect(refused.status == .forbidden || refused.status == .notFound, "\(path): \(refused.status)")
            }
            let allowed = try await harness.client.execute(
                uri: "/api/v1/requests", method: .post,
                headers: [.cookie: "push_console_session=\(cookie)", .contentType: "application/json", HTTPField.Name("X-CSRF-Token")!: csrf],
                body: ByteBuffer(string: body))
            #expect(allowed.status == .accepted)
            #expect(try await harness.backend.amqp.queueStatus(harness.names.requests.name).messages == 1, "only the one with the token")

            // A session value that is not what the console writes (a negative or huge creation time)
            // is no login, and cannot make the age arithmetic trap.
            for created in ["-9223372036854775808", "9223372036854775807", "x"] {
                let cookie = String(repeating: "ab", count: 32)
                _ = try await harness.redis.execute("SET", harness.sessions.key(cookie), "\(csrf) \(created) alice")
                #expect(try await harness.get("/requests", cookie: cookie).status == .seeOther, "\(created)")
            }

            // A session whose operator is no longer in the operators file is no login.
            let (stale, _) = try await harness.sessions.create(operatorName: "removed-operator")
            #expect(try await harness.get("/requests", cookie: stale).status == .seeOther)
        }
    }

    /// After five failures a name waits before its next try (1 s, doubling), per client address: a
    /// guesser elsewhere does not hold the operator back.
    @Test func failedLoginsBackOffPerNameAndAddress() async throws {
        // Live: a real socket, so the peer is 127.0.0.1 and its X-Forwarded-For is trusted.
        try await withConsole(trustedProxies: "127.0.0.0/8, ::1", testing: .live) { harness in
            func login(_ password: String, from address: String) async throws -> TestResponse {
                try await harness.client.execute(
                    uri: "/login", method: .post,
                    headers: [.contentType: "application/x-www-form-urlencoded", HTTPField.Name("X-Forwarded-For")!: address],
                    body: ByteBuffer(string: "name=alice&password=\(password.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"))
            }
            for attempt in 1...LoginThrottle.freeFailures {
                #expect(try await login("guess-\(attempt)", from: "203.0.113.66").status == .unauthorized)
            }
            let waiting = try await login("guess-x", from: "203.0.113.66")
            #expect(waiting.status == .tooManyRequests && waiting.headers[.retryAfter] == "1", "the sixth try waits a second")
            let right = try await login(ConsoleHTTPTests.password, from: "203.0.113.66")
            #expect(right.status == .tooManyRequests, "even the right password waits out the backoff")
            let elsewhere = try await login(ConsoleHTTPTests.password, from: "198.51.100.20")
            #expect(elsewhere.status == .seeOther, "alice from her own address is not held back by the guesser")
            try await Task.sleep(for: .milliseconds(1100))
            #expect(try await login(ConsoleHTTPTests.password, from: "203.0.113.66").status == .seeOther, "after the wait")
        }
    }

    /// A flood of logins with made-up names: one address runs out of its budget (answered before any
    /// password is hashed), many addresses wait in the line of password checks, and a real operator
    /// still logs in, in about the time of a few checks.
    @Test func aFloodOfMadeUpNamesDoesNotKeepAnOperatorOut() async throws {
        // Live: a real socket, so the peer is 127.0.0.1 and its X-Forwarded-For is trusted.
        try await withConsole(trustedProxies: "127.0.0.0/8, ::1", testing: .live) { harness in
            let port = try #require(harness.client.port)
            // A connection each, as many browsers and scripts would: one connection answers in order.
            @Sendable func login(_ name: String, _ password: String, from address: String) async throws -> HTTPResponse.Status {
                try await TestClient.withClient(host: "127.0.0.1", port: port) { client in
                    try await client.execute(
                        TestClient.Request(
                            "/login", method: .post,
                            headers: [.contentType: "application/x-www-form-urlencoded", HTTPField.Name("X-Forwarded-For")!: address],
                            body: ByteBuffer(
                                string: "name=\(name)&password=\(password.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"))
                    ).head.status
                }
            }
            let flood = Task {
                try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                    // 200 made-up names: half from one address, half from 100 addresses.
                    for index in 0..<200 {
                        let address = index % 2 == 0 ? "203.0.113.1" : "198.51.100.\(index / 2 % 100 + 1)"
                        group.addTask { try await login("nobody-\(UInt64.random(in: 0...UInt64.max))", "guess", from: address) }
                    }
                    var statuses: [HTTPResponse.Status: Int] = [:]
                    for try await status in group { statuses[status, default: 0] += 1 }
                    return statuses
                }
            }
            try await Task.sleep(for: .milliseconds(50))
            let start = ContinuousClock.now
            let operatorStatus = try await login("alice", ConsoleHTTPTests.password, from: "192.0.2.10")
            let took = ContinuousClock.now - start
            let statuses = try await flood.value
            #expect(operatorStatus == .seeOther, "alice logged in during the flood (\(took)); flood: \(statuses)")
            #expect(took < .seconds(5), "within the line's patience: \(took)")
            #expect(
                statuses[.tooManyRequests, default: 0] >= 100 - LoginThrottle.attemptsPerAddress,
                "the one address ran out of its budget: \(statuses)")
            print("flood of 200 made-up names: alice logged in after \(took); flood answers \(statuses)")
        }
    }

    /// A login form whose body arrives a byte at a time is cut off at the request deadline (the
    /// console has no other request timer), so slow clients cannot hold its connections.
    @Test func aSlowLoginBodyIsCutOff() async throws {
        try await withConsole(testing: .live, requestTimeout: .seconds(1)) { harness in
            let port = try #require(harness.client.port)
            let body = "name=alice&password=" + String(repeating: "x", count: 100)
            let request =
                "POST /login HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
                + body
            let open = try await Self.slowSend(port: port, request, interval: .milliseconds(100), bound: .seconds(6))
            let closed = try #require(open, "the console kept the slow request open for 6 s")
            #expect(closed < .seconds(3), "closed after \(closed)")
        }
    }

    /// Sends `request` one byte every `interval` until the server closes the connection or `bound`
    /// passes; how long it stayed open (nil: still open).
    static func slowSend(port: Int, _ request: String, interval: Duration, bound: Duration) async throws -> Duration? {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                let start = ContinuousClock.now
                let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                defer { close(descriptor) }
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_addr.s_addr = inet_addr("127.0.0.1")
                address.sin_port = in_port_t(UInt16(port).bigEndian)
                let connected = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
                guard connected == 0 else {
                    continuation.resume(throwing: TestFailure("connect() failed: errno \(errno)"))
                    return
                }
                var timeout = timeval(tv_sec: 0, tv_usec: 1000)
                setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                let bytes = Array(request.utf8)
                var index = 0
                var buffer = [UInt8](repeating: 0, count: 256)
                while ContinuousClock.now - start < bound {
                    if index < bytes.count {
                        guard withUnsafeBytes(of: bytes[index], { send(descriptor, $0.baseAddress, 1, Int32(MSG_NOSIGNAL)) }) == 1 else { break }
                        index += 1
                    }
                    let count = recv(descriptor, &buffer, buffer.count, 0)
                    if count == 0 || (count < 0 && errno != EAGAIN && errno != EWOULDBLOCK) { break }
                    Thread.sleep(forTimeInterval: Double(interval.components.attoseconds) / 1e18)
                }
                let elapsed = ContinuousClock.now - start
                continuation.resume(returning: elapsed < bound ? elapsed : nil)
            }.start()
        }
    }

    /// A session value the console did not sign is no login: written by hand into Redis, or a real
    /// one copied under another cookie's key. Keys rotate: a session signed by the old key still
    /// works while the old key is listed after the new one.
    @Test func sessionsRedisCanWriteButNotForge() async throws {
        let oldKey = try SessionKeys.parse(String(repeating: "o", count: 40), source: "old")
        let rotated = try SessionKeys.parse("\(String(repeating: "n", count: 40))\n\(String(repeating: "o", count: 40))", source: "rotated")
        let newOnly = try SessionKeys.parse(String(repeating: "n", count: 40), source: "new")
        try await withConsole(sessionKeys: rotated) { harness in
            let (cookie, csrf) = try await harness.login()
            let value = try #require(try await harness.redis.execute("GET", harness.sessions.key(cookie)).string)
            #expect(value.split(separator: " ").count == 4, "csrf, time, operator, mac: \(value)")

            // By hand, as anyone with write access to Redis could: no MAC, a made-up MAC, a copy.
            let forged = String(repeating: "cd", count: 32)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            for written in ["\(csrf) \(now) alice", "\(csrf) \(now) alice \(String(repeating: "0", count: 64))", value] {
                _ = try await harness.redis.execute("SET", harness.sessions.key(forged), written)
                #expect(try await harness.get("/requests", cookie: forged).status == .seeOther, "\(written.prefix(80))")
            }
            #expect(try await harness.get("/requests", cookie: cookie).status == .ok, "the real one still works")

            // Signed by the old key, checked with [new, old]: accepted; with [new] alone: refused.
            let old = ConsoleSessions(redis: harness.redis, keyPrefix: harness.sessions.keyPrefix, ttl: .seconds(600), keys: oldKey)
            let (oldCookie, _) = try await old.create(operatorName: "alice")
            #expect(try await harness.get("/requests", cookie: oldCookie).status == .ok, "the old key still verifies")
            let strict = ConsoleSessions(redis: harness.redis, keyPrefix: harness.sessions.keyPrefix, ttl: .seconds(600), keys: newOnly)
            await #expect(throws: ConsoleSessions.LookupError.self) { try await strict.find(oldCookie) }
        }
    }

    @Test func composePreviewsPerLocaleCountsTheTargetAndSendsToTheQueue() async throws {
        try await withConsole { harness in
            let (cookie, csrf) = try await harness.login()
            let form = [
                "csrf": csrf, "app": harness.app, "target_kind": "topic", "target": "news", "title_loc_key": "SHIPPED_TITLE",
                "loc_key": "GAME_PLAY_REQUEST_FORMAT", "loc_args": "Jenna,Frank", "localize": "server", "request_id": "console-test-1",
                "action": "preview",
            ]
            let preview = String(buffer: try await harness.post("/compose", form: form, cookie: cookie).body)
            #expect(preview.contains(#"<strong id="preview-targets">3</strong>"#))
            #expect(preview.contains("Deine Bestellung ist unterwegs"), "German from the server's catalog")
            #expect(preview.contains("你的訂單已出貨"))
            #expect(preview.contains("Send to 3 devices"))
            let json = try #require(preview.firstMatch(of: /name="request_json" value="([^"]*)"/)?.1)
                .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&amp;", with: "&")

            let invalid = try await harness.post("/compose", form: form.merging(["loc_key": "", "loc_args": "x"]) { $1 }, cookie: cookie)
            #expect(invalid.status == .badRequest && String(buffer: invalid.body).contains("loc_args: need a loc key"))
            let tooBig = try await harness.post(
                "/compose",
                form: form.merging(["title_loc_key": "", "loc_key": "", "loc_args": "", "body": String(repeating: "x", count: 5000)]) { $1 },
                cookie: cookie)
            #expect(String(buffer: tooBig.body).contains("payload"), "push-render's own size check names the payload")

            let sent = try await harness.post("/compose", form: ["csrf": csrf, "action": "send", "request_json": json], cookie: cookie)
            #expect(sent.status == .seeOther)
            #expect(sent.headers[.location] == "/requests/\(harness.app)/console-test-1")
            #expect(try await harness.backend.amqp.queueStatus(harness.names.requests.name).messages == 1, "published to push.requests")
            let report = try await harness.api(.get, "/api/v1/requests/\(harness.app)/console-test-1")
            #expect(report.status == .ok && report.json["state"] as? String == "queued")
            let list = try await harness.api(.get, "/api/v1/requests")
            #expect((list.json["requests"] as? [[String: Any]])?.first?["id"] as? String == "console-test-1")
            let page = String(buffer: try await harness.get("/requests/\(harness.app)/console-test-1", cookie: cookie).body)
            #expect(page.contains(#"data-state="queued""#))
            #expect(try await harness.get("/requests", cookie: cookie).status == .ok)

            // An id with a slash and a space: its page and its API answer are found by the encoded path.
            let odd = try await harness.api(
                .post, "/api/v1/requests",
                json: #"{"id": "order 47/11", "app": "\#(harness.app)", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}}"#)
            #expect(odd.status == .accepted)
            let oddPage = try await harness.get("/requests/\(harness.app)/order%2047%2F11", cookie: cookie)
            #expect(oddPage.status == .ok && String(buffer: oddPage.body).contains("order 47/11"))
            #expect(try await harness.api(.get, "/api/v1/requests/\(harness.app)/order%2047%2F11").json["id"] as? String == "order 47/11")
        }
    }

    @Test func theAPIPreviewsSendsAndNamesBadFields() async throws {
        try await withConsole { harness in
            let request = #"{"app": "\#(harness.app)", "to": {"users": ["user0", "user1"]}, "payload": {"aps": {"alert": "hi"}}}"#
            let preview = try await harness.api(.post, "/api/v1/preview", json: request)
            #expect(preview.status == .ok && preview.json["targets"] as? Int == 2)
            let bad = try await harness.api(
                .post, "/api/v1/preview", json: #"{"app": "\#(harness.app)", "to": {"topic": "news"}, "payload": {"aps": {"badge": "x"}}}"#)
            #expect(bad.status == .badRequest && (bad.json["message"] as? String ?? "").hasPrefix("payload.aps.badge"))
            let unknown = try await harness.api(
                .post, "/api/v1/requests", json: #"{"app": "com.nobody", "to": {"all": true}, "payload": {"aps": {}}}"#)
            #expect(unknown.status == .badRequest && (unknown.json["message"] as? String ?? "").hasPrefix("app"))
            let sent = try await harness.api(.post, "/api/v1/requests", json: request)
            #expect(sent.status == .accepted && sent.json["targets"] as? Int == 2 && (sent.json["id"] as? String ?? "").hasPrefix("console-"))
            let status = try await harness.api(.get, "/api/v1/status")
            let queues = try #require(status.json["queues"] as? [[String: Any]])
            #expect(queues.first { $0["name"] as? String == harness.names.requests.name }?["ready"] as? Int == 1)
            let apps = try #require(status.json["apps"] as? [[String: Any]])
            #expect(apps.first?["app"] as? String == harness.app)
            #expect(
                ((apps.first?["warnings"] as? [String]) ?? []).contains { $0.contains("push-send has not reported") },
                "the console reads no key file; without push-send's summary it says so: \(apps)")
            // push-send's summary (written as its credential watch does) is what the page shows.
            try await CredentialSummaries(redis: harness.redis, keyPrefix: harness.backend.reports.keyPrefix).write([
                CredentialSummary(
                    app: harness.app, kind: "certificate", environment: "production", expiresAt: Int64(Date().timeIntervalSince1970) + 20 * 86_400,
                    problems: [], warnings: ["expires in 20 days"], checkedAt: 0)
            ])
            let reported = try #require(try await harness.api(.get, "/api/v1/status").json["apps"] as? [[String: Any]])
            #expect(reported.first?["auth"] as? String == "certificate" && (reported.first?["warnings"] as? [String]) == ["expires in 20 days"])
            #expect(((reported.first?["expires_in_days"] as? Double) ?? 0) > 19.5, "\(reported)")
        }
    }

    @Test func deadLettersAreListedAndReplayedToTheirQueue() async throws {
        try await withConsole { harness in
            let body = #"{"id": "dead-1", "app": "\#(harness.app)", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}}"#
            try await harness.backend.amqp.publish(
                AMQPOutboundMessage(
                    exchange: harness.names.exchange, routingKey: harness.names.deadRoutingKey, body: Array(body.utf8),
                    properties: AMQPProperties(headers: [PushQueues.errorHeader: .string("test: made dead by hand")], persistent: true)))
            let (cookie, csrf) = try await harness.login()
            let page = String(buffer: try await harness.get("/dead", cookie: cookie).body)
            #expect(page.contains("test: made dead by hand"))
            let key = try #require(page.firstMatch(of: /class="dead-letter" data-key="([0-9a-f]{16})"/)?.1)
            let listed = try await harness.api(.get, "/api/v1/dead")
            #expect(
                (listed.json["dead_letters"] as? [[String: Any]])?.first?["target"] as? String == harness.names.requests.name,
                "inferred from the body")

            let replayed = try await harness.post("/dead/replay", form: ["csrf": csrf, "key": String(key), "queue": ""], cookie: cookie)
            #expect(replayed.status == .seeOther)
            #expect(try await harness.backend.amqp.queueStatus(harness.names.dead).messages == 0)
            #expect(try await harness.backend.amqp.queueStatus(harness.names.requests.name).messages == 1)
            let again = try await harness.api(.post, "/api/v1/dead/\(key)/replay")
            #expect(again.status == .notFound)
        }
    }

    @Test func tokensAreLookedUpAndRemoved() async throws {
        try await withConsole { harness in
            let (cookie, csrf) = try await harness.login()
            let token = harness.tokens[1]
            let found = String(buffer: try await harness.get("/tokens?app=\(harness.app)&token=\(token)", cookie: cookie).body)
            #expect(found.contains(#"id="token-record""#) && found.contains("user1"))
            let bad = try await harness.get("/tokens?app=\(harness.app)&token=xyz", cookie: cookie)
            #expect(bad.status == .badRequest && String(buffer: bad.body).contains("token:"))
            let removed = try await harness.post("/tokens/delete", form: ["csrf": csrf, "app": harness.app, "token": token], cookie: cookie)
            #expect(removed.status == .seeOther)
            let gone = String(buffer: try await harness.get("/tokens?app=\(harness.app)&token=\(token)", cookie: cookie).body)
            #expect(gone.contains(#"id="token-not-found""#))
            #expect(try await harness.api(.get, "/api/v1/apps/\(harness.app)/tokens/\(token)").status == .notFound)
            #expect(try await harness.api(.get, "/api/v1/apps/\(harness.app)/tokens/\(harness.tokens[0])").status == .ok)
            #expect(try await harness.api(.delete, "/api/v1/apps/\(harness.app)/tokens/\(harness.tokens[0])").status == .noContent)
        }
    }

    static let senderKey = String(repeating: "5e", count: 20)
    static let otherKey = String(repeating: "07", count: 20)

    /// Scopes from the operators file, each for some apps: a refusal is 403 naming the scope and the
    /// app, lists show only the apps granted, and the audit log records refusals and reads of
    /// personal data.
    @Test func scopesLimitWhatEachOperatorAndKeyMayDoAndTheAuditLogSaysSo() async throws {
        let hash = PasswordHash.make(password: Self.password, rounds: 100_000).encoded
        let operators = """
            {"operators": [{"name": "alice", "password": "\(hash)"},
                           {"name": "reader", "password": "\(hash)", "scopes": ["read"], "apps": ["$APP"]}],
             "api_keys": [{"name": "bot", "key_sha256": "\(OperatorCredentials.keyDigestHex(Self.apiKey))"},
                          {"name": "sender", "key_sha256": "\(OperatorCredentials.keyDigestHex(Self.senderKey))", "scopes": ["send:$APP"]},
                          {"name": "other", "key_sha256": "\(OperatorCredentials.keyDigestHex(Self.otherKey))",
                           "scopes": ["read", "tokens", "dead-letters", "send"], "apps": ["$OTHER"]}]}
            """
        let capture = TestLogCapture()
        try await withConsole(operators: operators, otherApp: TestServers.uniqueName("com.test.other"), logger: capture.logger) { harness in
            let request = #"{"app": "\#(harness.app)", "to": {"all": true}, "payload": {"aps": {"alert": "x"}}}"#
            // sender: sends to its app, nothing else.
            #expect(try await harness.api(.post, "/api/v1/requests", json: request, key: Self.senderKey).status == .accepted)
            for (path, scope) in [
                ("/api/v1/requests", "read"), ("/api/v1/status", "read"), ("/api/v1/dead", "dead-letters"),
                ("/api/v1/apps/\(harness.app)/tokens/\(harness.tokens[0])", "tokens"),
            ] {
                let refused = try await harness.api(.get, path, key: Self.senderKey)
                #expect(refused.status == .forbidden, "\(path)")
                #expect((refused.json["message"] as? String ?? "").contains("scope \(scope)"), "\(path): \(refused.json)")
            }
            // other: every scope, for the other app only.
            let otherSend = try await harness.api(.post, "/api/v1/requests", json: request, key: Self.otherKey)
            #expect(otherSend.status == .forbidden && (otherSend.json["message"] as? String ?? "").contains("send for the app \(harness.app)"))
            #expect(try await harness.api(.get, "/api/v1/apps/\(harness.app)/tokens/\(harness.tokens[0])", key: Self.otherKey).status == .forbidden)
            #expect(try await harness.api(.get, "/api/v1/requests/\(harness.app)/x", key: Self.otherKey).status == .forbidden)
            let listed = try await harness.api(.get, "/api/v1/requests", key: Self.otherKey)
            #expect(listed.status == .ok && (listed.json["requests"] as? [Any])?.isEmpty == true, "the app's request is not listed: \(listed.json)")
            #expect((try await harness.api(.get, "/api/v1/requests").json["requests"] as? [Any])?.count == 1, "the admin sees it")
            let status = try await harness.api(.get, "/api/v1/status", key: Self.otherKey)
            #expect((status.json["apps"] as? [[String: Any]])?.map { $0["app"] as? String } == [harness.otherApp])
            // A dead letter of the first app: hidden from other, and not replayed by it.
            try await harness.backend.amqp.publish(
                AMQPOutboundMessage(
                    exchange: harness.names.exchange, routingKey: harness.names.deadRoutingKey, body: Array(request.utf8),
                    properties: AMQPProperties(headers: [PushQueues.errorHeader: .string("test: dead by hand")], persistent: true)))
            let hidden = try await harness.api(.get, "/api/v1/dead", key: Self.otherKey)
            #expect(hidden.status == .ok && (hidden.json["dead_letters"] as? [Any])?.isEmpty == true, "\(hidden.json)")
            let letters = try #require(try await harness.api(.get, "/api/v1/dead").json["dead_letters"] as? [[String: Any]])
            #expect(letters.count == 1 && letters.first?["app"] as? String == harness.app)
            let key = try #require(letters.first?["key"] as? String)
            let replay = try await harness.api(.post, "/api/v1/dead/\(key)/replay", key: Self.otherKey)
            #expect(replay.status == .forbidden, "\(replay.json)")
            try await eventually("the letter is back in push.dead") { try await harness.backend.amqp.queueStatus(harness.names.dead).messages == 1 }

            // reader logs in: the pages it may not use answer 403 on the page, and its navigation
            // leaves them out.
            let (cookie, _) = try await harness.login("reader")
            let requestsPage = String(buffer: try await harness.get("/requests", cookie: cookie).body)
            #expect(requestsPage.contains(#"id="nav-requests""#) && !requestsPage.contains(#"id="nav-tokens""#))
            let tokensPage = try await harness.get("/tokens?app=\(harness.app)&token=\(harness.tokens[0])", cookie: cookie)
            #expect(tokensPage.status == .forbidden)
            #expect(String(buffer: tokensPage.body).contains("lacks the scope tokens"))

            // The admin key looks a token up: a read of personal data, in the audit log.
            #expect(try await harness.api(.get, "/api/v1/apps/\(harness.app)/tokens/\(harness.tokens[0])").status == .ok)
            #expect(try await harness.api(.get, "/api/v1/status", key: "not a key").status == .unauthorized)
            let audit = capture.entries.filter { $0.message == "console action" }
            func logged(_ action: String, _ check: ([String: String]) -> Bool = { _ in true }) -> Bool {
                audit.contains { $0.metadata["push.action"] == action && check($0.metadata) }
            }
            #expect(logged("refused") { $0["push.reason"] == "scope" && $0["push.scope"] == "tokens" && $0["push.operator"] == "reader" })
            #expect(logged("refused") { $0["push.reason"] == "scope" && $0["push.scope"] == "send" && $0["push.operator"] == "other" })
            #expect(logged("refused") { $0["push.reason"] == "bad_key" })
            #expect(logged("token.lookup") { $0["push.operator"] == "bot" && $0["push.app"] == harness.app && $0["push.found"] == "true" })
            #expect(logged("dead.read") { $0["push.operator"] == "bot" && $0["push.letters"] == "1" })
            #expect(logged("login") { $0["push.operator"] == "reader" && $0["push.client"] != nil })
            #expect(!audit.contains { ($0.metadata["push.token"] ?? "").count > 12 }, "tokens are redacted in the log")
        }
    }

    @Test func pauseNotesExpireWithThePause() async throws {
        let redis = try await TestServers.connectRedis(logger: Self.logger)
        let prefix = TestServers.uniqueName("test-pauses")
        let notes = AppPauseNotes(redis: redis, keyPrefix: prefix)
        try await notes.write(app: "a", reason: "ExpiredProviderToken", duration: .milliseconds(300))
        #expect(try await notes.read(apps: ["a", "b"])["a"]?.reason == "ExpiredProviderToken")
        try await Task.sleep(for: .milliseconds(450))
        #expect(try await notes.read(apps: ["a"]).isEmpty)
        await redis.close()
    }
}
