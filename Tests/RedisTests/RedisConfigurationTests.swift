import Testing

@testable import Redis

@Suite("RedisConfiguration URL parsing")
struct RedisConfigurationTests {
    @Test func defaults() throws {
        let configuration = try RedisConfiguration(url: "redis://localhost")
        #expect(configuration.endpoint == RedisEndpoint(host: "localhost", port: 6379))
        #expect(configuration.database == 0)
        #expect(configuration.username == nil)
        #expect(configuration.password == nil)
        #expect(configuration.connectTimeout == .milliseconds(2000))
        #expect(configuration.commandTimeout == .milliseconds(2000))
        #expect(configuration.poolSize == 2)
    }

    @Test func hostPortDatabaseAndOptions() throws {
        let configuration = try RedisConfiguration(
            url: "redis://127.0.0.1:6419/3?connect_timeout_ms=250&command_timeout_ms=1500&pool_size=4")
        #expect(configuration.endpoint == RedisEndpoint(host: "127.0.0.1", port: 6419))
        #expect(configuration.database == 3)
        #expect(configuration.connectTimeout == .milliseconds(250))
        #expect(configuration.commandTimeout == .milliseconds(1500))
        #expect(configuration.poolSize == 4)
    }

    @Test func trailingSlashMeansDatabaseZero() throws {
        #expect(try RedisConfiguration(url: "redis://h:1/").database == 0)
        #expect(try RedisConfiguration(url: "REDIS://h:1?pool_size=1").poolSize == 1)
    }

    @Test func passwordOnly() throws {
        let configuration = try RedisConfiguration(url: "redis://:s3cret@cache.internal:6380/1")
        #expect(configuration.username == nil)
        #expect(configuration.password == "s3cret")
        #expect(configuration.endpoint == RedisEndpoint(host: "cache.internal", port: 6380))
        #expect(configuration.database == 1)
    }

    @Test func userAndPercentEncodedPassword() throws {
        let configuration = try RedisConfiguration(url: "redis://push%2Dingest:p%40ss%3Aw%2Frd%25@h:7000/2")
        #expect(configuration.username == "push-ingest")
        #expect(configuration.password == "p@ss:w/rd%")
    }

    @Test func rawSpecialCharactersInPasswordStayInThePassword() throws {
        let configuration = try RedisConfiguration(url: "redis://u:a/b?c@d@h:7000/2")
        #expect(configuration.password == "a/b?c@d")
        #expect(configuration.endpoint == RedisEndpoint(host: "h", port: 7000))
        #expect(configuration.database == 2)
    }

    @Test func ipv6Host() throws {
        let configuration = try RedisConfiguration(url: "redis://[::1]:6390/0")
        #expect(configuration.endpoint.host == "::1")
        #expect(configuration.endpoint.port == 6390)
        #expect(configuration.endpoint.description == "[::1]:6390")
        #expect(try RedisConfiguration(url: "redis://[::1]").endpoint.port == 6379)
    }

    @Test func descriptionNeverShowsThePassword() throws {
        let configuration = try RedisConfiguration(url: "redis://app:hunter2@h:1/5")
        #expect(configuration.description == "redis://app:***@h:1/5")
        #expect(!configuration.description.contains("hunter2"))
        #expect(try RedisConfiguration(url: "redis://:pw@h").description == "redis://:***@h:6379/0")
    }

    @Test func fromEnvironment() throws {
        let configuration = try RedisConfiguration.fromEnvironment(["PUSH_REDIS_URL": "redis://r:1/2"])
        #expect(configuration.endpoint == RedisEndpoint(host: "r", port: 1))
        let error = try #require(throws: RedisError.self) { try RedisConfiguration.fromEnvironment([:]) }
        #expect(error.code == .invalidURL)
        #expect(error.message.contains("PUSH_REDIS_URL is not set"))
    }

    @Test(arguments: [
        ("redis://h:abc/0", "port", "invalid port 'abc' in PUSH_REDIS_URL"),
        ("redis://h:0", "port", "invalid port '0'"),
        ("redis://h:65536", "port", "invalid port '65536'"),
        ("redis://h:-1", "port", "invalid port '-1'"),
        ("redis://h:", "port", "invalid port ''"),
        ("redis://h/abc", "db", "invalid database 'abc'"),
        ("redis://h/1/2", "db", "invalid database '1/2'"),
        ("redis://h/-1", "db", "invalid database '-1'"),
        ("rediss://h", "scheme", "'rediss://' (TLS) is not supported"),
        ("http://h", "scheme", "unsupported scheme 'http'"),
        ("localhost:6379", "scheme", "missing 'redis://'"),
        ("redis://", "host", "missing host"),
        ("redis://:6379/0", "host", "missing host"),
        ("redis://bad host", "host", "invalid host 'bad host'"),
        ("redis://[::1", "host", "unterminated '['"),
        ("redis://[zz]", "host", "invalid IPv6 host 'zz'"),
        ("redis://secretword@h", "password", "credentials without ':'"),
        ("redis://:@h", "password", "empty password"),
        ("redis://:bad%zzpw@h", "password", "invalid percent-encoding in the password"),
        ("redis://h?timeout=5", "timeout", "unknown option 'timeout'"),
        ("redis://h?command_timeout_ms=0", "command_timeout_ms", "invalid command_timeout_ms '0'"),
        ("redis://h?connect_timeout_ms=fast", "connect_timeout_ms", "invalid connect_timeout_ms 'fast'"),
        ("redis://h?pool_size=1000", "pool_size", "invalid pool_size '1000'"),
    ])
    func malformedURLsNameWhatIsWrong(url: String, field: String, message: String) {
        let error = #expect(throws: RedisError.self) { try RedisConfiguration(url: url) }
        #expect(error?.code == .invalidURL)
        #expect(error?.field == field)
        #expect(error?.message.contains(message) == true, "\(error?.message ?? "no error")")
        #expect(error?.isRetryable == false)
    }

    @Test func errorsNeverEchoThePassword() {
        for url in ["redis://:topsecret@h:abc", "redis://u:topsecret@h/x", "redis://u:topsecret@bad host", "redis://topsecret@h"] {
            let error = #expect(throws: RedisError.self) { try RedisConfiguration(url: url) }
            #expect(error?.message.contains("topsecret") == false, "\(url)")
        }
    }

    @Test func sourceNamesWhereTheURLCameFrom() {
        let error = #expect(throws: RedisError.self) { try RedisConfiguration(url: "redis://h:x", source: "REDIS_CACHE_URL") }
        #expect(error?.message == "invalid port 'x' in REDIS_CACHE_URL (expected 1–65535)")
    }
}
