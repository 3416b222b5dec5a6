import Foundation
import Logging
import PushServiceKit
import Synchronization
import Testing

@Suite("Configuration")
struct PushConfigurationTests {
    static let defaults = PushConfiguration(httpPort: PushConfiguration.DefaultHTTPPort.render)

    static func load(_ environment: [String: String]) async throws(ConfigurationError) -> PushConfiguration {
        try await PushConfiguration.load(environment: environment, defaults: defaults)
    }

    /// The error loading `environment` throws; records an issue when it loads.
    static func error(loading environment: [String: String], sourceLocation: SourceLocation = #_sourceLocation) async -> ConfigurationError? {
        do {
            _ = try await load(environment)
            Issue.record("loaded without error", sourceLocation: sourceLocation)
            return nil
        } catch {
            return error
        }
    }

    // MARK: Defaults and overrides

    @Test func defaultsAreTheContractsWithTheServicePort() async throws {
        let configuration = try await Self.load([:])
        #expect(configuration == Self.defaults)
        #expect(configuration.amqpURL == "amqp://guest:guest@127.0.0.1:5672/%2f")
        #expect(configuration.redisURL == "redis://127.0.0.1:6379/0")
        #expect(configuration.appsFile == "config/apps.json")
        #expect(configuration.apnsEndpoint == nil)
        #expect(configuration.apnsCAFile == nil)
        #expect(configuration.localizationDir == "localization")
        #expect(configuration.httpPort == 9101)
        #expect(configuration.httpHost == "0.0.0.0")
        #expect(configuration.logLevel == .info)
        #expect(configuration.logFormat == .text)
        #expect(configuration.shutdownTimeout == .seconds(30))
    }

    @Test func defaultPortsPerService() {
        #expect(PushConfiguration.DefaultHTTPPort.ingest == 8080)
        #expect(PushConfiguration.DefaultHTTPPort.render == 9101)
        #expect(PushConfiguration.DefaultHTTPPort.send == 9102)
        #expect(PushConfiguration.DefaultHTTPPort.feedback == 9103)
    }

    @Test func everyKeyIsReadFromTheEnvironment() async throws {
        let configuration = try await Self.load([
            "PUSH_AMQP_URL": "amqps://user:pw@rabbit.example:5671/prod",
            "PUSH_AMQP_QUORUM_SIZE": "3",
            "PUSH_REDIS_URL": "redis://:pw@redis.example:6380/2",
            "PUSH_APPS_FILE": "/etc/push/apps.json",
            "PUSH_APNS_ENDPOINT": "https://127.0.0.1:2197",
            "PUSH_APNS_CA_FILE": "/tmp/ca.pem",
            "PUSH_LOCALIZATION_DIR": "/srv/strings",
            "PUSH_HTTP_PORT": "9200",
            "PUSH_HTTP_HOST": "127.0.0.1",
            "PUSH_LOG_LEVEL": "debug",
            "PUSH_LOG_FORMAT": "json",
            "PUSH_SHUTDOWN_TIMEOUT_S": "2.5",
        ])
        #expect(configuration.amqpURL == "amqps://user:pw@rabbit.example:5671/prod")
        #expect(configuration.amqpQuorumSize == 3)
        #expect(configuration.redisURL == "redis://:pw@redis.example:6380/2")
        #expect(configuration.appsFile == "/etc/push/apps.json")
        #expect(configuration.apnsEndpoint?.absoluteString == "https://127.0.0.1:2197")
        #expect(configuration.apnsCAFile == "/tmp/ca.pem")
        #expect(configuration.localizationDir == "/srv/strings")
        #expect(configuration.httpPort == 9200)
        #expect(configuration.httpHost == "127.0.0.1")
        #expect(configuration.logLevel == .debug)
        #expect(configuration.logFormat == .json)
        #expect(configuration.shutdownTimeout == .milliseconds(2500))
    }

    @Test func valuesAreCaseInsensitiveWhereTheyAreNames() async throws {
        let configuration = try await Self.load(["PUSH_LOG_LEVEL": "WARNING", "PUSH_LOG_FORMAT": "Json"])
        #expect(configuration.logLevel == .warning)
        #expect(configuration.logFormat == .json)
    }

    @Test func emptyValuesCountAsUnset() async throws {
        let configuration = try await Self.load(["PUSH_APNS_ENDPOINT": "", "PUSH_HTTP_PORT": "  ", "PUSH_LOG_LEVEL": ""])
        #expect(configuration == Self.defaults)
    }

    @Test func apnsEndpointWithTrailingSlashIsAccepted() async throws {
        let configuration = try await Self.load(["PUSH_APNS_ENDPOINT": "https://api.sandbox.push.apple.com/"])
        #expect(configuration.apnsEndpoint?.host == "api.sandbox.push.apple.com")
    }

    // MARK: Bad values

    @Test(arguments: [
        ("PUSH_HTTP_PORT", "80a", #"PUSH_HTTP_PORT: "80a" is not a port number (1–65535)"#),
        ("PUSH_HTTP_PORT", "0", #"PUSH_HTTP_PORT: "0" is not a port number (1–65535)"#),
        ("PUSH_HTTP_PORT", "65536", #"PUSH_HTTP_PORT: "65536" is not a port number (1–65535)"#),
        ("PUSH_HTTP_PORT", "-1", #"PUSH_HTTP_PORT: "-1" is not a port number (1–65535)"#),
        (
            "PUSH_AMQP_URL", "http://rabbit:5672",
            #"PUSH_AMQP_URL: "http://rabbit:5672" is not an AMQP URL (amqp://user:password@host:port/vhost, or amqps:// for TLS; a cluster's brokers separated by commas): unsupported scheme 'http' in 'http://rabbit:5672' (expected amqp or amqps)"#
        ),
        (
            "PUSH_AMQP_URL", "amqp://",
            #"PUSH_AMQP_URL: "amqp://" is not an AMQP URL (amqp://user:password@host:port/vhost, or amqps:// for TLS; a cluster's brokers separated by commas): no host in 'amqp://'"#
        ),
        (
            "PUSH_AMQP_URL", "amqp://a:5672/%2f,b:x",
            #"PUSH_AMQP_URL: "amqp://a:5672/%2f,b:x" is not an AMQP URL (amqp://user:password@host:port/vhost, or amqps:// for TLS; a cluster's brokers separated by commas): broker 'b:x': invalid port 'x'"#
        ),
        (
            "PUSH_AMQP_QUORUM_SIZE", "0",
            #"PUSH_AMQP_QUORUM_SIZE: "0" is not a whole number (1–99)"#
        ),
        (
            "PUSH_REDIS_URL", "127.0.0.1:6379",
            #"PUSH_REDIS_URL: "127.0.0.1:6379" is not a Redis URL (redis://[:password@]host:port/db, or redis+cluster://host:port,host:port,… for a Redis Cluster): missing 'redis://' in PUSH_REDIS_URL (expected redis://[:password@]host[:port][/db])"#
        ),
        (
            "PUSH_REDIS_URL", "redis://127.0.0.1:6379/zero",
            #"PUSH_REDIS_URL: "redis://127.0.0.1:6379/zero" is not a Redis URL (redis://[:password@]host:port/db, or redis+cluster://host:port,host:port,… for a Redis Cluster): invalid database 'zero' in PUSH_REDIS_URL (expected a number such as /0)"#
        ),
        (
            "PUSH_REDIS_URL", "redis+cluster://127.0.0.1:7000,127.0.0.1:7000",
            #"PUSH_REDIS_URL: "redis+cluster://127.0.0.1:7000,127.0.0.1:7000" is not a Redis URL (redis://[:password@]host:port/db, or redis+cluster://host:port,host:port,… for a Redis Cluster): 127.0.0.1:7000 is listed twice in PUSH_REDIS_URL"#
        ),
        (
            "PUSH_APNS_ENDPOINT", "http://127.0.0.1:2197",
            #"PUSH_APNS_ENDPOINT: "http://127.0.0.1:2197" is not an https URL with a host and optional port (e.g. https://127.0.0.1:2197)"#
        ),
        (
            "PUSH_APNS_ENDPOINT", "https://127.0.0.1:2197/3/device",
            #"PUSH_APNS_ENDPOINT: "https://127.0.0.1:2197/3/device" is not an https URL with a host and optional port only (e.g. https://127.0.0.1:2197, no path)"#
        ),
        (
            "PUSH_APNS_ENDPOINT", "https://",
            #"PUSH_APNS_ENDPOINT: "https://" is not an https URL with a host and optional port (e.g. https://127.0.0.1:2197)"#
        ),
        (
            "PUSH_APNS_ENDPOINT", "https://127.0.0.1:99999",
            #"PUSH_APNS_ENDPOINT: "https://127.0.0.1:99999" has a port outside 1–65535"#
        ),
        ("PUSH_HTTP_HOST", "local host", #"PUSH_HTTP_HOST: "local host" is not a host name or IP address"#),
        (
            "PUSH_LOG_LEVEL", "loud",
            #"PUSH_LOG_LEVEL: "loud" is not a log level (trace, debug, info, notice, warning, error, critical)"#
        ),
        ("PUSH_LOG_FORMAT", "xml", #"PUSH_LOG_FORMAT: "xml" is not a log format (text, json)"#),
        ("PUSH_SHUTDOWN_TIMEOUT_S", "soon", #"PUSH_SHUTDOWN_TIMEOUT_S: "soon" is not a number of seconds (more than 0)"#),
        ("PUSH_SHUTDOWN_TIMEOUT_S", "0", #"PUSH_SHUTDOWN_TIMEOUT_S: "0" is not a number of seconds (more than 0)"#),
    ])
    func badValuesNameTheKeyTheValueAndWhatIsExpected(key: String, value: String, message: String) async throws {
        let error = try #require(await Self.error(loading: [key: value]))
        #expect(error.description == message)
        #expect(error.key == key)
        #expect(error.code == .invalidValue)
    }

    @Test func passwordsInURLsAreMaskedInMessages() async throws {
        let error = try #require(await Self.error(loading: ["PUSH_AMQP_URL": "http://admin:hunter2@rabbit:5672/"]))
        #expect(error.description.hasPrefix(#"PUSH_AMQP_URL: "http://admin:***@rabbit:5672/" is not an AMQP URL"#))
        #expect(!error.description.contains("hunter2"))
        // A password with a raw '@' is masked up to the last '@', where the URL parser splits it.
        let atSign = try #require(await Self.error(loading: ["PUSH_AMQP_URL": "http://admin:p@ss@w0rd@rabbit:5672/"]))
        #expect(atSign.description.hasPrefix(#"PUSH_AMQP_URL: "http://admin:***@rabbit:5672/""#), "\(atSign.description)")
        #expect(!atSign.description.contains("ss@w0rd"))
        let list = try #require(await Self.error(loading: ["PUSH_AMQP_URL": "http://a:s3cr@t@one:5672/,http://a:s3cr@t@two:5672/"]))
        #expect(!list.description.contains("s3cr"), "\(list.description)")
        let comma = try #require(await Self.error(loading: ["PUSH_AMQP_URL": "http://u:pa,ss@rabbit:5672/"]))
        #expect(comma.description.contains("http://u:***@rabbit:5672/") && !comma.description.contains("pa,"), "\(comma.description)")
    }

    // MARK: Config file

    @Test func theConfigFileFillsInUnderTheEnvironment() async throws {
        try await withTemporaryDirectory { directory in
            let file = try write(
                #"{"PUSH_HTTP_PORT": 9300, "PUSH_LOG_FORMAT": "json", "PUSH_AMQP_URL": "amqp://file:5672/%2f", "PUSH_SHUTDOWN_TIMEOUT_S": 5}"#,
                to: directory.appendingPathComponent("push.json")
            )
            let configuration = try await Self.load([
                "PUSH_CONFIG_FILE": file,
                "PUSH_AMQP_URL": "amqp://environment:5672/%2f",
            ])
            #expect(configuration.httpPort == 9300)
            #expect(configuration.logFormat == .json)
            #expect(configuration.amqpURL == "amqp://environment:5672/%2f")
            #expect(configuration.shutdownTimeout == .seconds(5))
            #expect(configuration.redisURL == PushConfiguration.defaultRedisURL)
        }
    }

    @Test func aBadValueFromTheFileNamesTheFile() async throws {
        try await withTemporaryDirectory { directory in
            let file = try write(#"{"PUSH_LOG_LEVEL": "loud"}"#, to: directory.appendingPathComponent("push.json"))
            let error = try #require(await Self.error(loading: ["PUSH_CONFIG_FILE": file]))
            #expect(
                error.description
                    == "PUSH_LOG_LEVEL (from \(file)): \"loud\" is not a log level (trace, debug, info, notice, warning, error, critical)"
            )
        }
    }

    @Test func aMissingConfigFileIsNamed() async throws {
        let path = "/nonexistent/push-\(UUID().uuidString).json"
        let error = try #require(await Self.error(loading: ["PUSH_CONFIG_FILE": path]))
        #expect(error.code == .configFileUnreadable)
        #expect(error.key == "PUSH_CONFIG_FILE")
        #expect(error.description == "PUSH_CONFIG_FILE: \"\(path)\" does not exist")
    }

    @Test func aDirectoryAsConfigFileIsNamed() async throws {
        try await withTemporaryDirectory { directory in
            let error = try #require(await Self.error(loading: ["PUSH_CONFIG_FILE": directory.path]))
            #expect(error.code == .configFileUnreadable)
            #expect(error.description == "PUSH_CONFIG_FILE: \"\(directory.path)\" cannot be read")
        }
    }

    @Test(arguments: [
        (#"{"PUSH_HTTP_PORT": "#, "is not valid JSON"),
        (#"["PUSH_HTTP_PORT"]"#, #"must hold a JSON object of keys, e.g. {"PUSH_HTTP_PORT": 9102}"#),
        (#"{"PUSH_HTTP_PORT": {"value": 1}}"#, #"has "PUSH_HTTP_PORT", which must be a string, number or boolean"#),
        (#"{"PUSH_AMQP_URL": null}"#, #"has "PUSH_AMQP_URL", which must be a string, number or boolean"#),
    ])
    func anUnparseableConfigFileIsNamed(contents: String, reason: String) async throws {
        try await withTemporaryDirectory { directory in
            let file = try write(contents, to: directory.appendingPathComponent("push.json"))
            let error = try #require(await Self.error(loading: ["PUSH_CONFIG_FILE": file]))
            #expect(error.code == .configFileInvalid)
            #expect(error.key == "PUSH_CONFIG_FILE")
            #expect(error.description.hasPrefix("PUSH_CONFIG_FILE: \"\(file)\" \(reason)"))
        }
    }

    // MARK: Unknown keys

    @Test func unknownKeysAreListedNotRejected() async throws {
        try await withTemporaryDirectory { directory in
            let file = try write(#"{"PUSH_LOG_LEVL": "debug", "amqp_url": "x"}"#, to: directory.appendingPathComponent("push.json"))
            let reader = try await PushConfigurationReader.load(environment: [
                "PUSH_AMPQ_URL": "amqp://x",
                "PUSH_HTTP_PORT": "9000",
                "PUSH_TEST_AMQP_URL": "amqp://test",
                "PUSH_CONFIG_FILE": file,
                "HOME": "/root",
            ])
            _ = try PushConfiguration(reader: reader, defaults: Self.defaults)
            #expect(reader.unknownKeys(known: PushConfiguration.keys) == ["PUSH_AMPQ_URL", "PUSH_LOG_LEVL", "amqp_url"])
            #expect(reader.unknownKeys(known: PushConfiguration.keys.union(["PUSH_AMPQ_URL", "PUSH_LOG_LEVL", "amqp_url"])) == [])
        }
    }

    @Test func unknownKeysAreLoggedAsOneWarningWithHints() async throws {
        let reader = try await PushConfigurationReader.load(environment: ["PUSH_AMPQ_URL": "amqp://x", "PUSH_SEND_BATCH": "5"])
        let lines = CollectedLines()
        let logger = Logger(label: "test") { label in
            PushLogHandler(format: .text, label: label, logLevel: .trace, output: LogOutput { lines.append($0) })
        }
        reader.warnAboutUnknownKeys(logger: logger)
        let logged = lines.all
        #expect(logged.count == 1)
        let line = try #require(logged.first)
        #expect(line.contains(" warning test: Unknown configuration keys are ignored: PUSH_AMPQ_URL (did you mean PUSH_AMQP_URL?), PUSH_SEND_BATCH"))
        #expect(line.contains("push.config.unknown_keys="))

        let quiet = CollectedLines()
        let quietLogger = Logger(label: "test") { label in
            PushLogHandler(format: .text, label: label, logLevel: .trace, output: LogOutput { quiet.append($0) })
        }
        reader.warnAboutUnknownKeys(known: PushConfiguration.keys.union(["PUSH_AMPQ_URL", "PUSH_SEND_BATCH"]), logger: quietLogger)
        #expect(quiet.all.isEmpty)
    }

    // MARK: Keys of a service's own

    @Test func servicesReadTheirOwnKeysWithTheSameMessages() async throws {
        let reader = try await PushConfigurationReader.load(environment: [
            "PUSH_SEND_BATCH_SIZE": "5000",
            "PUSH_SEND_DRY_RUN": "yes",
            "PUSH_SEND_MODE": "FAST",
            "PUSH_SEND_RETRY_S": "0.25",
            "PUSH_SEND_SECRET": "abc",
        ])
        #expect(throws: ConfigurationError.self) { try reader.int("PUSH_SEND_BATCH_SIZE", default: 200, in: 1...1000) }
        do {
            _ = try reader.int("PUSH_SEND_BATCH_SIZE", default: 200, in: 1...1000)
        } catch {
            #expect(error.description == #"PUSH_SEND_BATCH_SIZE: "5000" is not a whole number (1–1000)"#)
        }
        #expect(try reader.int("PUSH_SEND_WORKERS", default: 4, in: 1...64) == 4)
        #expect(try reader.bool("PUSH_SEND_DRY_RUN", default: false))
        #expect(try reader.seconds("PUSH_SEND_RETRY_S", default: .seconds(1)) == .milliseconds(250))

        enum Mode: String, CaseIterable { case fast, careful }
        #expect(try reader.choice("PUSH_SEND_MODE", default: Mode.careful) == .fast)
        #expect(try reader.choice("PUSH_SEND_OTHER_MODE", default: Mode.careful) == .careful)

        do {
            _ = try reader.int("PUSH_SEND_SECRET", default: 1, in: 1...2)
            Issue.record("a bad value was accepted")
        } catch {
            #expect(error.description == #"PUSH_SEND_SECRET: "<redacted>" is not a whole number (1–2)"#)
        }
        #expect(reader.string("PUSH_SEND_SECRET") == "abc")
    }
}

/// Lines a test handler wrote.
final class CollectedLines: Sendable {
    private let lines = Mutex<[String]>([])

    func append(_ line: String) {
        lines.withLock { $0.append(line) }
    }

    var all: [String] {
        lines.withLock { $0 }
    }
}

/// Makes a temporary directory, runs `body` with it and removes it.
func withTemporaryDirectory(_ body: (URL) async throws -> Void) async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("push-kit-tests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    try await body(directory)
}

/// Writes `contents` to `url` and returns its path.
@discardableResult
func write(_ contents: String, to url: URL) throws -> String {
    try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
    try Data(contents.utf8).write(to: url)
    return url.path
}
