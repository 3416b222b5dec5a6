import Foundation
import Hummingbird
import HummingbirdTesting
import PushCore
import PushIngest
import PushServiceKit
import RateLimiting
import Redis
import TestSupport
import TokenRegistry

/// push-ingest's HTTP application, built with ``PushIngest/buildIngestApplication(configuration:ingest:apps:registry:rateLimiter:readiness:logger:onServerRunning:)``
/// exactly as `main` builds it, served on a free port of loopback and talking to the real Redis
/// (`TestServers.redisURL`, or a private one). Building it throws, failing the test, when Redis is
/// not there.
///
/// Each harness has its own registry key prefix and rate-limit key prefix, so tests running in
/// parallel on one Redis never see each other's records or counters; ``cleanUp()`` removes its keys.
struct HTTPIngestHarness: Sendable {
    let redis: RedisClient
    let registry: TokenRegistry
    let apps: AppsFile
    let ingest: IngestConfiguration
    let prefix: String

    static let logger = TestLogger.make("push-ingest-http-tests")

    /// - Parameters:
    ///   - apps: The apps file (default ``standardApps``).
    ///   - ingest: Limits and bounds; its rate-limit key prefix is replaced by one of this harness.
    ///   - redisURL: The Redis to use (default the shared test Redis).
    ///   - connect: Whether to connect before returning (a test of Redis being down passes false).
    static func make(
        apps: [AppConfiguration] = HTTPIngestHarness.standardApps,
        ingest: IngestConfiguration = IngestConfiguration(),
        redisURL: String = TestServers.redisURL,
        connect: Bool = true
    ) async throws -> HTTPIngestHarness {
        let configuration = try RedisConfiguration(url: redisURL, source: "PUSH_TEST_REDIS_URL")
        let redis =
            connect
            ? try await RedisClient.connect(configuration: configuration, logger: logger)
            : RedisClient(configuration: configuration, logger: logger)
        let prefix = TestServers.uniqueName("test-ingest")
        var ingest = ingest
        ingest.rateLimitKeyPrefix = "\(prefix):ratelimit"
        return HTTPIngestHarness(
            redis: redis,
            registry: TokenRegistry(redis: redis, keyPrefix: prefix),
            apps: try AppsFile(apps: apps),
            ingest: ingest,
            prefix: prefix
        )
    }

    /// Serves the application and runs `body` with a client of it; stops the server after.
    func run<Value: Sendable>(_ body: @Sendable (HTTPIngestClient) async throws -> Value) async throws -> Value {
        let application = buildIngestApplication(
            configuration: PushConfiguration(httpPort: 0, httpHost: "127.0.0.1"),
            ingest: ingest,
            apps: apps,
            registry: registry,
            rateLimiter: RateLimiter(redis: redis),
            readiness: [ReadinessCheck("redis") { [redis] in redis.isConnected ? .ready : .notReady("not connected") }],
            logger: Self.logger
        )
        return try await application.test(.live) { client in
            try await body(HTTPIngestClient(client: client))
        }
    }

    /// Removes every key this harness wrote, then closes the Redis client.
    func cleanUp() async {
        _ = try? await redis.deleteKeys(matching: "\(prefix)*")
        await redis.close()
    }

    /// The stored record of the token `hex` (any spelling) for `app`, or nil.
    func record(_ app: String, _ hex: String) async throws -> DeviceRecord? {
        let token = try DeviceToken(normalizing: hex)
        return try await registry.record(app: app, token: token)
    }

    /// The tokens of `user`'s set for `app`, sorted.
    func tokens(app: String, user: String) async throws -> [String] {
        var tokens: [String] = []
        for try await batch in try await registry.tokens(app: app, user: user) {
            tokens += batch.map(\.hex)
        }
        return tokens.sorted()
    }

    // MARK: Apps

    static let game = "com.example.game"
    static let shop = "com.example.shop"
    static let quiet = "com.example.quiet"
    static let gameKeys = ["game-key-1", "game-key-2"]
    static let shopKey = "shop-key"
    static let shopSecret = "shop-secret-0123456789"

    static let apns = AppConfiguration.APNsCredentials.token(.init(keyFile: "keys/AuthKey_ABC123DEFG.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ"))

    /// - `com.example.game`: the default app, display name "Monopoly Party", sandbox, two API keys,
    ///   legacy credential `md5`;
    /// - `com.example.shop`: display name "Shop", production, one API key, `hmac-sha256`;
    /// - `com.example.quiet`: no API keys (the API refuses it), credential `none`.
    static let standardApps: [AppConfiguration] = [
        AppConfiguration(
            bundleID: game,
            displayNames: ["Monopoly Party"],
            isDefault: true,
            environment: .sandbox,
            apns: apns,
            ingest: .init(apiKeys: gameKeys, credential: .md5, timestampWindow: .seconds(300), pushToken: true)
        ),
        AppConfiguration(
            bundleID: shop,
            displayNames: ["Shop"],
            environment: .production,
            apns: apns,
            ingest: .init(apiKeys: [shopKey], credential: .hmacSHA256, secret: shopSecret, timestampWindow: .seconds(60))
        ),
        AppConfiguration(bundleID: quiet, apns: apns, ingest: .init(credential: .none)),
    ]
}

/// Helpers of the HTTP tests.
enum HTTPTesting {
    /// `hex` as an `NSData` description: `<740f4707 bebcf74f …>`, uppercase to check case folding too.
    static func nsDataDescription(_ hex: String) -> String {
        var groups: [String] = []
        var rest = Substring(hex)
        while !rest.isEmpty {
            groups.append(String(rest.prefix(8)))
            rest = rest.dropFirst(8)
        }
        return "<" + groups.joined(separator: " ").uppercased() + ">"
    }

    /// Percent-encodes `text` for a query value (everything but unreserved characters).
    static func formEncoded(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    /// Wall-clock ms since 1970, as the legacy `timestamp`.
    static func nowMilliseconds() -> Int64 {
        Int64(Date().timeIntervalSince1970 * 1000)
    }
}

/// A client of the application under test, with the requests the tests make.
struct HTTPIngestClient: Sendable {
    let client: any TestClientProtocol

    var port: Int { client.port ?? 0 }

    func put(
        _ app: String, _ token: String, json: String, key: String? = HTTPIngestHarness.gameKeys[0], contentType: String? = "application/json"
    ) async throws -> TestResponse {
        var headers: HTTPFields = [:]
        if let key { headers[.authorization] = "Bearer \(key)" }
        if let contentType { headers[.contentType] = contentType }
        return try await client.execute(uri: "/v1/apps/\(app)/devices/\(token)", method: .put, headers: headers, body: ByteBuffer(string: json))
    }

    func get(_ app: String, _ token: String, key: String? = HTTPIngestHarness.gameKeys[0]) async throws -> TestResponse {
        var headers: HTTPFields = [:]
        if let key { headers[.authorization] = "Bearer \(key)" }
        return try await client.execute(uri: "/v1/apps/\(app)/devices/\(token)", method: .get, headers: headers)
    }

    func delete(_ app: String, _ token: String, key: String? = HTTPIngestHarness.gameKeys[0]) async throws -> TestResponse {
        var headers: HTTPFields = [:]
        if let key { headers[.authorization] = "Bearer \(key)" }
        return try await client.execute(uri: "/v1/apps/\(app)/devices/\(token)", method: .delete, headers: headers)
    }

    /// `GET uri` (a legacy `/register?…` URL, an admin route).
    func get(_ uri: String, headers: HTTPFields = [:]) async throws -> TestResponse {
        try await client.execute(uri: uri, method: .get, headers: headers)
    }

    /// `POST path` with a form body.
    func postForm(_ path: String, _ body: String, contentType: String = "application/x-www-form-urlencoded") async throws -> TestResponse {
        try await client.execute(uri: path, method: .post, headers: [.contentType: contentType], body: ByteBuffer(string: body))
    }
}

extension TestResponse {
    /// The body as a JSON object (empty when it is not one).
    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(String(buffer: body).utf8))) as? [String: Any] ?? [:]
    }

    var text: String { String(buffer: body) }
}

/// The ten parameters of the legacy registration a shipped iOS app sends, in its order, URL-encoded.
struct LegacyRegistrationURL {
    var deviceToken: String
    var deviceUUID = "6D5A1F3C-2B8E-4E0F-9C57-2E8B3A0D4F11"
    var deviceName = "Jenna's iPhone"
    var deviceVersion = "17.5.1"
    var appName = "Monopoly Party"
    var timestamp = String(HTTPTesting.nowMilliseconds())
    var pushBadge = "enabled"
    var pushAlert = "enabled"
    var pushSound = "disabled"
    var credential = ""

    /// The query string (without `?`).
    var query: String {
        [
            ("device_token", deviceToken), ("device_uuid", deviceUUID), ("device_name", deviceName),
            ("device_version", deviceVersion), ("app_name", appName), ("timestamp", timestamp),
            ("push_badge", pushBadge), ("push_alert", pushAlert), ("push_sound", pushSound), ("credential", credential),
        ].map { "\($0)=\(HTTPTesting.formEncoded($1))" }.joined(separator: "&")
    }

    var path: String { "/register?" + query }
}

// MARK: - Raw HTTP

/// Sends raw bytes to 127.0.0.1:`port` and reads until the server closes or answers, on a thread of
/// its own (the socket calls block), within `timeout`. For what a well-behaved client cannot send: a
/// body that never arrives, oversized headers.
/// A request whose body is shorter than its `Content-Length` is a stalled upload: the connection stays
/// open until the server answers or `timeout` passes.
///
/// - Returns: the bytes received (the response head and body) as text, and how long it took.
func rawHTTPExchange(port: Int, _ request: String, timeout: Duration) async throws -> (response: String, elapsed: Duration) {
    try await withCheckedThrowingContinuation { continuation in
        Thread {
            let start = ContinuousClock.now
            let descriptor: Int32
            do {
                descriptor = try connectedLoopbackSocket(port: port, receiveTimeout: timeval(tv_sec: Int(timeout.components.seconds), tv_usec: 0))
            } catch {
                continuation.resume(throwing: error)
                return
            }
            defer { close(descriptor) }
            let bytes = Array(request.utf8)
            var sent = 0
            while sent < bytes.count {
                let result = bytes[sent...].withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if result <= 0 { break }  // the server may close early (oversized headers); read what it said
                sent += result
            }
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while ContinuousClock.now - start < timeout {
                let count = recv(descriptor, &buffer, buffer.count, 0)
                if count <= 0 { break }
                received += buffer[0..<count]
                if let text = String(validating: received, as: UTF8.self), RawHTTPResponse.isComplete(text) { break }
            }
            continuation.resume(returning: (String(decoding: received, as: UTF8.self), ContinuousClock.now - start))
        }.start()
    }
}

/// Sends `request` to 127.0.0.1:`port` one byte every `interval`, as a slow client (slowloris)
/// would, until the server closes the connection or `bound` passes; how long the server kept it open
/// (nil: still open at `bound`).
func slowRequestHead(port: Int, _ request: String, interval: Duration, bound: Duration) async throws -> Duration? {
    try await withCheckedThrowingContinuation { continuation in
        Thread {
            let start = ContinuousClock.now
            let descriptor: Int32
            do {
                descriptor = try connectedLoopbackSocket(port: port, receiveTimeout: timeval(tv_sec: 0, tv_usec: 1000))
            } catch {
                continuation.resume(throwing: error)
                return
            }
            defer { close(descriptor) }
            let bytes = Array(request.utf8)
            var index = 0
            var buffer = [UInt8](repeating: 0, count: 256)
            while ContinuousClock.now - start < bound {
                if index < bytes.count {
                    let result = withUnsafeBytes(of: bytes[index]) { send(descriptor, $0.baseAddress, 1, Int32(MSG_NOSIGNAL)) }
                    if result <= 0 { break }
                    index += 1
                }
                // A closed connection reads as 0 bytes (or fails); no answer is expected before the head ends.
                let count = recv(descriptor, &buffer, buffer.count, 0)
                if count == 0 || (count < 0 && errno != EAGAIN && errno != EWOULDBLOCK) { break }
                Thread.sleep(forTimeInterval: Double(interval.components.attoseconds) / 1e18 + Double(interval.components.seconds))
            }
            let elapsed = ContinuousClock.now - start
            continuation.resume(returning: elapsed < bound ? elapsed : nil)
        }.start()
    }
}

/// Connects to 127.0.0.1:`port`, sends nothing for `after`, then `request`; the answer (within 5 s).
func delayedHTTPExchange(port: Int, after: Duration, _ request: String) async throws -> String {
    try await withCheckedThrowingContinuation { continuation in
        Thread {
            let descriptor: Int32
            do {
                descriptor = try connectedLoopbackSocket(port: port, receiveTimeout: timeval(tv_sec: 5, tv_usec: 0))
            } catch {
                continuation.resume(throwing: error)
                return
            }
            defer { close(descriptor) }
            Thread.sleep(forTimeInterval: Double(after.components.seconds) + Double(after.components.attoseconds) / 1e18)
            let bytes = Array(request.utf8)
            _ = bytes.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(descriptor, &buffer, buffer.count, 0)
            continuation.resume(returning: count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self) : "")
        }.start()
    }
}

/// A TCP socket connected to 127.0.0.1:`port`, reads timing out after `receiveTimeout`; the caller closes it.
func connectedLoopbackSocket(port: Int, receiveTimeout: timeval) throws -> Int32 {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw ChildProcessError("socket() failed: errno \(errno)") }
    var timeout = receiveTimeout
    setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else {
        close(descriptor)
        throw ChildProcessError("connect() to port \(port) failed: errno \(errno)")
    }
    return descriptor
}

private enum RawHTTPResponse {
    /// Whether `text` holds a whole response: a head and a `Content-Length` body.
    static func isComplete(_ text: String) -> Bool {
        guard let headEnd = text.range(of: "\r\n\r\n") else { return false }
        let head = text[..<headEnd.lowerBound].lowercased()
        guard let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
            let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces))
        else { return true }
        return text[headEnd.upperBound...].utf8.count >= length
    }
}

/// The private Redis the outage test stops and restarts (never the shared one).
enum TestRedis {
    static let outage = LocalServer(.redis, name: "ingest-redis-test", port: 6423)
    /// The private Redis the full-Redis test fills (maxmemory, noeviction).
    static let full = LocalServer(.redis, name: "ingest-redis-full-test", port: 6434)
}
