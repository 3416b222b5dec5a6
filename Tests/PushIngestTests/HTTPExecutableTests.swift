import Foundation
import Redis
import TestSupport
import Testing

/// The built `push-ingest` run as ops run it: a bad apps file stops it with a message naming the app
/// and field; a good one serves the API and the admin routes on `PUSH_HTTP_PORT` and stops with exit 0
/// on SIGTERM. Against the real test servers.
@Suite struct HTTPExecutableTests {
    private static func executable() throws -> String {
        let path = TestServers.productsDirectory.appendingPathComponent("push-ingest").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw ChildProcessError("\(path) is not built (swift test builds every product)")
        }
        return path
    }

    private static func writeAppsFile(_ json: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ingest-apps-\(UUID().uuidString).json").path
        try json.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Starts push-ingest for a default app `app` (API key `exec-key`, credential none) with
    /// `environment` added, and waits until `/readyz` answers 200 on `readyPort`. Returns the process
    /// and the apps file to remove.
    private static func startReady(app: String, environment: [String: String], readyPort: Int) async throws -> (ChildProcess, String) {
        let apps = try writeAppsFile(
            """
            {"apps": {"\(app)": {"default": true,
              "apns": {"key_file": "k.p8", "key_id": "ABC123DEFG", "team_id": "DEF123GHIJ"},
              "ingest": {"api_keys": ["exec-key"], "credential": "none"}}}}
            """
        )
        let child = try ChildProcess(
            [try executable()],
            environment: [
                "PUSH_APPS_FILE": apps, "PUSH_AMQP_URL": TestServers.amqpURL, "PUSH_REDIS_URL": TestServers.redisURL,
                "PUSH_HTTP_HOST": "127.0.0.1",
            ].merging(environment) { _, given in given }
        )
        var ready = ""
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline, child.status == nil {
            ready =
                (try? await rawHTTPExchange(port: readyPort, "GET /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n", timeout: .seconds(3)).response)
                ?? ""
            if ready.hasPrefix("HTTP/1.1 200") { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(ready.hasPrefix("HTTP/1.1 200"), "\(ready)\n\(child.output)")
        return (child, apps)
    }

    @Test func aBadAppsFileStopsTheServiceNamingTheAppAndField() async throws {
        let apps = try Self.writeAppsFile(
            """
            {"apps": {"com.example.game": {"default": true,
              "apns": {"key_file": "k.p8", "key_id": "ABC123DEFG", "team_id": "DEF123GHIJ"},
              "ingest": {"credential": "hmac-sha256"}}}}
            """
        )
        defer { try? FileManager.default.removeItem(atPath: apps) }
        let child = try ChildProcess(
            [try Self.executable()],
            environment: [
                "PUSH_APPS_FILE": apps, "PUSH_AMQP_URL": TestServers.amqpURL, "PUSH_REDIS_URL": TestServers.redisURL,
                "PUSH_HTTP_PORT": String(TestServers.freePort()), "PUSH_HTTP_HOST": "127.0.0.1",
            ]
        )
        let status = await child.waitForExit(timeout: .seconds(20))
        #expect(status != nil && status != 0, "\(child.output)")
        #expect(child.output.contains(#"apps["com.example.game"].ingest.secret"#), "\(child.output)")
    }

    @Test func theServiceRegistersOverHTTPAndStopsCleanlyOnSIGTERM() async throws {
        let bundleID = TestServers.uniqueName("com.test.exec")
        let port = TestServers.freePort()
        let (child, apps) = try await Self.startReady(app: bundleID, environment: ["PUSH_HTTP_PORT": String(port)], readyPort: port)
        defer { try? FileManager.default.removeItem(atPath: apps) }

        let token = TestTokens.random()
        let body = #"{"user": "alice"}"#
        let put =
            "PUT /v1/apps/\(bundleID)/devices/\(token) HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer exec-key\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        let created = try await rawHTTPExchange(port: port, put, timeout: .seconds(5)).response
        #expect(created.hasPrefix("HTTP/1.1 201"), "\(created)")
        let legacy = try await rawHTTPExchange(
            port: port,
            "GET /register?device_token=\(token) HTTP/1.1\r\nHost: localhost\r\n\r\n",
            timeout: .seconds(5)
        ).response
        #expect(legacy.hasSuffix(#"{"ret":0,"msg":"ok"}"#), "\(legacy)")
        let metrics = try await rawHTTPExchange(port: port, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n", timeout: .seconds(5)).response
        #expect(metrics.contains(#"push_ingest_requests_total{endpoint="put",outcome="created"} 1"#), "\(metrics.prefix(2000))")

        child.signal(SIGTERM)
        #expect(await child.waitForExit(timeout: .seconds(15)) == 0, "\(child.output)")

        // The service writes under the production prefix; remove this test's app.
        let redis = try await TestServers.connectRedis(logger: HTTPIngestHarness.logger)
        let keys = try await redis.execute("KEYS", "push:{\(bundleID)}:*").array?.compactMap(\.string) ?? []
        if !keys.isEmpty { try await redis.execute(RedisCommand(["UNLINK"] + keys)) }
        await redis.close()
    }

    /// With PUSH_ADMIN_PORT the public port serves only the API, and the admin routes answer on their
    /// own port (issue 18, item 7).
    @Test func anAdminPortTakesTheAdminRoutesOffThePublicPort() async throws {
        let bundleID = TestServers.uniqueName("com.test.admin")
        let port = TestServers.freePort()
        let adminPort = TestServers.freePort()
        let (child, apps) = try await Self.startReady(
            app: bundleID, environment: ["PUSH_HTTP_PORT": String(port), "PUSH_ADMIN_PORT": String(adminPort)], readyPort: adminPort)
        defer { try? FileManager.default.removeItem(atPath: apps) }
        for path in ["/metrics", "/readyz", "/healthz"] {
            let publicAnswer = try await rawHTTPExchange(port: port, "GET \(path) HTTP/1.1\r\nHost: localhost\r\n\r\n", timeout: .seconds(5))
            #expect(publicAnswer.response.hasPrefix("HTTP/1.1 404"), "\(path) on the public port: \(publicAnswer.response.prefix(200))")
        }
        let metrics = try await rawHTTPExchange(port: adminPort, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n", timeout: .seconds(5))
        #expect(metrics.response.hasPrefix("HTTP/1.1 200"), "\(metrics.response.prefix(200))")
        let api = try await rawHTTPExchange(
            port: port,
            "GET /v1/apps/\(bundleID)/devices/\(TestTokens.random()) HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer exec-key\r\n\r\n",
            timeout: .seconds(5))
        #expect(api.response.hasPrefix("HTTP/1.1 404"), "an unknown token is 404 from the API: \(api.response.prefix(200))")
        #expect(api.response.contains("not_found"))
        child.signal(SIGTERM)
        #expect(await child.waitForExit(timeout: .seconds(15)) == 0, "\(child.output)")
    }
}
