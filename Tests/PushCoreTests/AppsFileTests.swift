import Foundation
import PushCore
import Testing

@Suite("Apps file")
struct AppsFileTests {
    /// The example of CONTRACT.md, "Apps file".
    static let contractExample = """
        {
          "apps": {
            "com.example.game": {
              "display_names": ["Monopoly Party"],
              "default": true,
              "environment": "production",
              "apns": { "key_file": "keys/AuthKey_ABC123DEFG.p8", "key_id": "ABC123DEFG", "team_id": "DEF123GHIJ" },
              "ingest": { "api_keys": ["k1", "k2"], "credential": "md5", "secret": "s3cret", "timestamp_window_s": 300, "push_token": true },
              "rate_limits": { "per_device_per_hour": 60, "per_app_per_second": 5000 }
            }
          }
        }
        """

    static let tokenAPNs = #"{"key_file": "keys/AuthKey_ABC123DEFG.p8", "key_id": "ABC123DEFG", "team_id": "DEF123GHIJ"}"#

    /// An apps file with one app `com.example.game` whose fields are `appBody` plus token-auth `apns`
    /// unless `appBody` has its own.
    static func file(app appBody: String = "", bundleID: String = "com.example.game") -> Data {
        let apns = appBody.contains("\"apns\"") ? "" : "\"apns\": \(tokenAPNs)"
        let separator = appBody.isEmpty || apns.isEmpty ? "" : ", "
        return Data(#"{"apps": {"\#(bundleID)": {\#(appBody)\#(separator)\#(apns)}}}"#.utf8)
    }

    static func decode(_ json: String, directory: String = "") throws -> AppsFile {
        try AppsFile(json: Data(json.utf8), directory: directory)
    }

    /// The error decoding `data` throws; records an issue when it decodes.
    static func error(decoding data: Data, sourceLocation: SourceLocation = #_sourceLocation) -> AppsFileError? {
        do {
            _ = try AppsFile(json: data, directory: "config")
            Issue.record("decoded without error", sourceLocation: sourceLocation)
            return nil
        } catch {
            return error
        }
    }

    // MARK: Decoding

    @Test func decodesTheContractExample() throws {
        let file = try Self.decode(Self.contractExample, directory: "config")
        #expect(file.bundleIDs == ["com.example.game"])
        let app = try #require(file.app(bundleID: "com.example.game"))
        #expect(app.bundleID == "com.example.game")
        #expect(app.displayNames == ["Monopoly Party"])
        #expect(app.isDefault)
        #expect(app.environment == .production)
        #expect(
            app.apns == .token(.init(keyFile: "config/keys/AuthKey_ABC123DEFG.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ"))
        )
        #expect(app.ingest.apiKeys == ["k1", "k2"])
        #expect(app.ingest.credential == .md5)
        #expect(app.ingest.secret == "s3cret")
        #expect(app.ingest.timestampWindow == .seconds(300))
        #expect(app.ingest.pushToken)
        #expect(app.rateLimits == .init(perDevicePerHour: 60, perAppPerSecond: 5000))
        #expect(file.defaultApp == app)
    }

    @Test func omittedFieldsTakeTheirDocumentedDefaults() throws {
        let file = try AppsFile(json: Self.file(), directory: "")
        let app = try #require(file.app(bundleID: "com.example.game"))
        #expect(app.displayNames == [])
        #expect(app.isDefault == false)
        #expect(app.environment == .production)
        #expect(app.ingest.apiKeys == [])
        #expect(app.ingest.credential == .hmacSHA256, "md5 only where an app names it")
        #expect(app.ingest.secret == nil)
        #expect(app.ingest.timestampWindow == .seconds(300))
        #expect(!app.ingest.pushToken, "/push_token is off unless an app enables it")
        #expect(app.rateLimits.perDevicePerHour == 60)
        #expect(app.rateLimits.perAppPerSecond == 5000)
        #expect(file.defaultApp == nil)
    }

    @Test func nullCountsAsAbsent() throws {
        let file = try AppsFile(json: Self.file(app: #""display_names": null, "default": null, "ingest": null"#))
        let app = try #require(file.app(bundleID: "com.example.game"))
        #expect(app.displayNames == [])
        #expect(app.isDefault == false)
        #expect(app.ingest == AppConfiguration.Ingest())
    }

    @Test func partialSectionsKeepTheOtherDefaults() throws {
        let file = try AppsFile(
            json: Self.file(app: #""environment": "sandbox", "ingest": {"credential": "none"}, "rate_limits": {"per_app_per_second": 10}"#)
        )
        let app = try #require(file.app(bundleID: "com.example.game"))
        #expect(app.environment == .sandbox)
        #expect(app.ingest.credential == .none)
        #expect(app.ingest.timestampWindow == .seconds(300))
        #expect(app.rateLimits == .init(perDevicePerHour: 60, perAppPerSecond: 10))
        #expect(app.rateLimits.dropLowPriority == false)
    }

    @Test func dropLowPriorityIsReadFromRateLimits() throws {
        let file = try AppsFile(json: Self.file(app: #""rate_limits": {"drop_low_priority": true}"#))
        let limits = try #require(file.app(bundleID: "com.example.game")).rateLimits
        #expect(limits == .init(perDevicePerHour: 60, perAppPerSecond: 5000, dropLowPriority: true))
        #expect(throws: AppsFileError.self) {
            try AppsFile(json: Self.file(app: #""rate_limits": {"drop_low_priority": "yes"}"#))
        }
    }

    @Test func deliveryGuaranteeAndCollapseIDsAreReadWithSafeDefaults() throws {
        let plain = try #require(try AppsFile(json: Self.file(app: "")).app(bundleID: "com.example.game")).delivery
        #expect(plain == .init(guarantee: .atLeastOnce, collapseIDFromRequest: true))
        let file = try AppsFile(json: Self.file(app: #""delivery": {"guarantee": "at-most-once", "collapse_id_from_request": false}"#))
        let delivery = try #require(file.app(bundleID: "com.example.game")).delivery
        #expect(delivery == .init(guarantee: .atMostOnce, collapseIDFromRequest: false))
    }

    @Test func hmacSHA256WithASecretIsAccepted() throws {
        let file = try AppsFile(json: Self.file(app: #""ingest": {"credential": "hmac-sha256", "secret": "k", "timestamp_window_s": 60}"#))
        let ingest = try #require(file.app(bundleID: "com.example.game")).ingest
        #expect(ingest.credential == .hmacSHA256)
        #expect(ingest.secret == "k")
        #expect(ingest.timestampWindow == .seconds(60))
    }

    // MARK: Credentials and paths

    @Test func pkcs12CertificateWithAndWithoutPassword() throws {
        let withPassword = try AppsFile(
            json: Self.file(app: #""apns": {"certificate_file": "certs/cert.p12", "certificate_password": "pw"}"#),
            directory: "/etc/push"
        )
        #expect(withPassword.app(bundleID: "com.example.game")?.apns == .pkcs12(certificateFile: "/etc/push/certs/cert.p12", password: "pw"))
        let withoutPassword = try AppsFile(json: Self.file(app: #""apns": {"certificate_file": "cert.p12"}"#), directory: "/etc/push/")
        #expect(withoutPassword.app(bundleID: "com.example.game")?.apns == .pkcs12(certificateFile: "/etc/push/cert.p12", password: ""))
    }

    @Test func pemCertificateWithPrivateKey() throws {
        let file = try AppsFile(
            json: Self.file(app: #""apns": {"certificate_file": "cert.pem", "private_key_file": "/secure/key.pem"}"#),
            directory: "config"
        )
        #expect(file.app(bundleID: "com.example.game")?.apns == .pem(certificateFile: "config/cert.pem", privateKeyFile: "/secure/key.pem"))
    }

    @Test(arguments: [
        ("config", "keys/a.p8", "config/keys/a.p8"),
        ("config/", "keys/a.p8", "config/keys/a.p8"),
        ("/etc/push", "a.p8", "/etc/push/a.p8"),
        ("config", "/abs/a.p8", "/abs/a.p8"),
        ("", "keys/a.p8", "keys/a.p8"),
        (".", "keys/a.p8", "keys/a.p8"),
    ])
    func relativePathsAreResolvedAgainstTheAppsFileDirectory(directory: String, keyFile: String, resolved: String) throws {
        let json = Self.file(app: #""apns": {"key_file": "\#(keyFile)", "key_id": "ABC123DEFG", "team_id": "DEF123GHIJ"}"#)
        let file = try AppsFile(json: json, directory: directory)
        guard case .token(let key) = file.app(bundleID: "com.example.game")?.apns else {
            Issue.record("not token auth")
            return
        }
        #expect(key.keyFile == resolved)
    }

    // MARK: Errors naming the app and the field

    struct BadFile: Sendable, CustomTestStringConvertible {
        let name: String
        let json: String
        let code: AppsFileError.Code
        let message: String

        var testDescription: String { name }
    }

    static let badFiles: [BadFile] = [
        BadFile(
            name: "key id too short",
            json: #""apns": {"key_file": "k.p8", "key_id": "ABC", "team_id": "DEF123GHIJ"}"#,
            code: .invalidValue,
            message: #"apps["com.example.game"].apns.key_id: must be 10 characters (letters and digits), got "ABC""#
        ),
        BadFile(
            name: "team id with a dash",
            json: #""apns": {"key_file": "k.p8", "key_id": "ABC123DEFG", "team_id": "DEF-23GHIJ"}"#,
            code: .invalidValue,
            message: #"apps["com.example.game"].apns.team_id: must be 10 characters (letters and digits), got "DEF-23GHIJ""#
        ),
        BadFile(
            name: "token auth without team id",
            json: #""apns": {"key_file": "k.p8", "key_id": "ABC123DEFG"}"#,
            code: .missingField,
            message: #"apps["com.example.game"].apns.team_id: is required for token auth"#
        ),
        BadFile(
            name: "empty key file",
            json: #""apns": {"key_file": " ", "key_id": "ABC123DEFG", "team_id": "DEF123GHIJ"}"#,
            code: .invalidValue,
            message: #"apps["com.example.game"].apns.key_file: must not be empty"#
        ),
        BadFile(
            name: "token and certificate mixed",
            json: #""apns": {"key_file": "k.p8", "key_id": "ABC123DEFG", "team_id": "DEF123GHIJ", "certificate_file": "c.p12"}"#,
            code: .invalidValue,
            message:
                #"apps["com.example.game"].apns: use either token auth (key_file, key_id, team_id) or a certificate (certificate_file, …), not both"#
        ),
        BadFile(
            name: "empty apns",
            json: #""apns": {}"#,
            code: .missingField,
            message: #"apps["com.example.game"].apns: needs token auth (key_file, key_id, team_id) or a certificate (certificate_file)"#
        ),
        BadFile(
            name: "missing apns",
            json: #""environment": "production", "apns": null"#,
            code: .missingField,
            message: #"apps["com.example.game"].apns: is required"#
        ),
        BadFile(
            name: "PEM certificate without private key",
            json: #""apns": {"certificate_file": "cert.pem"}"#,
            code: .missingField,
            message: #"apps["com.example.game"].apns.private_key_file: is required with a PEM certificate_file ("cert.pem")"#
        ),
        BadFile(
            name: "password with a PEM key",
            json: #""apns": {"certificate_file": "cert.pem", "private_key_file": "key.pem", "certificate_password": "x"}"#,
            code: .invalidValue,
            message:
                #"apps["com.example.game"].apns.certificate_password: belongs to a PKCS#12 certificate_file; a PEM certificate with private_key_file takes no password"#
        ),
        BadFile(
            name: "private key without certificate",
            json: #""apns": {"private_key_file": "key.pem"}"#,
            code: .missingField,
            message: #"apps["com.example.game"].apns.certificate_file: is required for certificate auth"#
        ),
        BadFile(
            name: "environment value",
            json: #""environment": "prod""#,
            code: .invalidValue,
            message: #"apps["com.example.game"].environment: must be "production" or "sandbox", got "prod""#
        ),
        BadFile(
            name: "credential value",
            json: #""ingest": {"credential": "sha1"}"#,
            code: .invalidValue,
            message: #"apps["com.example.game"].ingest.credential: must be "md5", "hmac-sha256" or "none", got "sha1""#
        ),
        BadFile(
            name: "hmac-sha256 without secret",
            json: #""ingest": {"credential": "hmac-sha256"}"#,
            code: .missingField,
            message: #"apps["com.example.game"].ingest.secret: is required when credential is "hmac-sha256" (or secret_file: a file holding it)"#
        ),
        BadFile(
            name: "hmac-sha256 with empty secret",
            json: #""ingest": {"credential": "hmac-sha256", "secret": ""}"#,
            code: .missingField,
            message: #"apps["com.example.game"].ingest.secret: is required when credential is "hmac-sha256" (or secret_file: a file holding it)"#
        ),
        BadFile(
            name: "secret and secret_file",
            json: #""ingest": {"credential": "hmac-sha256", "secret": "s", "secret_file": "keys/s"}"#,
            code: .invalidValue,
            message: #"apps["com.example.game"].ingest.secret_file: use either secret or secret_file, not both"#
        ),
        BadFile(
            name: "no Live Activity slots",
            json: #""ingest": {"max_activity_slots": 0}"#,
            code: .invalidValue,
            message: #"apps["com.example.game"].ingest.max_activity_slots: must be 1–10000, got 0"#
        ),
        BadFile(
            name: "a negative new-token budget",
            json: #""ingest": {"new_tokens_per_minute": -1}"#,
            code: .invalidValue,
            message: #"apps["com.example.game"].ingest.new_tokens_per_minute: must be 0–100000000 (0 = no budget), got -1"#
        ),
        BadFile(
            name: "timestamp window zero",
            json: #""ingest": {"timestamp_window_s": 0}"#,
            code: .invalidValue,
            message: #"apps["com.example.game"].ingest.timestamp_window_s: must be 1–86400 (seconds), got 0"#
        ),
        BadFile(
            // Used to reach ms arithmetic in the legacy credential check, where it overflowed.
            name: "timestamp window of centuries",
            json: #""ingest": {"timestamp_window_s": 9223372036854775807}"#,
            code: .invalidValue,
            message: #"apps["com.example.game"].ingest.timestamp_window_s: must be 1–86400 (seconds), got 9223372036854775807"#
        ),
        BadFile(
            name: "timestamp window as a string",
            json: #""ingest": {"timestamp_window_s": "300"}"#,
            code: .wrongType,
            message: #"apps["com.example.game"].ingest.timestamp_window_s: must be a whole number, got a string"#
        ),
        BadFile(
            name: "fractional rate limit",
            json: #""rate_limits": {"per_app_per_second": 1.5}"#,
            code: .invalidValue,
            message: #"apps["com.example.game"].rate_limits.per_app_per_second: must be a whole number, got 1.5"#
        ),
        BadFile(
            name: "unknown delivery guarantee",
            json: #""delivery": {"guarantee": "exactly-once"}"#,
            code: .invalidValue,
            message: #"apps["com.example.game"].delivery.guarantee: must be "at-least-once" or "at-most-once", got "exactly-once""#
        ),
        BadFile(
            name: "collapse switch as a string",
            json: #""delivery": {"collapse_id_from_request": "no"}"#,
            code: .wrongType,
            message: #"apps["com.example.game"].delivery.collapse_id_from_request: must be true or false, got a string"#
        ),
        BadFile(
            name: "rate limit zero",
            json: #""rate_limits": {"per_device_per_hour": 0}"#,
            code: .invalidValue,
            message: #"apps["com.example.game"].rate_limits.per_device_per_hour: must be at least 1, got 0"#
        ),
        BadFile(
            name: "default as a string",
            json: #""default": "yes""#,
            code: .wrongType,
            message: #"apps["com.example.game"].default: must be true or false, got a string"#
        ),
        BadFile(
            name: "default as a number",
            json: #""default": 1"#,
            code: .wrongType,
            message: #"apps["com.example.game"].default: must be true or false, got a number"#
        ),
        BadFile(
            name: "display names as a string",
            json: #""display_names": "Game""#,
            code: .wrongType,
            message: #"apps["com.example.game"].display_names: must be an array of strings, got a string"#
        ),
        BadFile(
            name: "display name not a string",
            json: #""display_names": ["Game", 7]"#,
            code: .wrongType,
            message: #"apps["com.example.game"].display_names[1]: must be a string, got a number"#
        ),
        BadFile(
            name: "empty display name",
            json: #""display_names": [""]"#,
            code: .invalidValue,
            message: #"apps["com.example.game"].display_names[0]: must not be empty"#
        ),
        BadFile(
            name: "empty api key",
            json: #""ingest": {"api_keys": ["good", ""]}"#,
            code: .invalidValue,
            message: #"apps["com.example.game"].ingest.api_keys[1]: must not be empty"#
        ),
        BadFile(
            name: "ingest as an array",
            json: #""ingest": []"#,
            code: .wrongType,
            message: #"apps["com.example.game"].ingest: must be an object, got an array"#
        ),
        BadFile(
            name: "unknown app field",
            json: #""defualt": true"#,
            code: .unknownField,
            message:
                #"apps["com.example.game"].defualt: unknown field (allowed here: display_names, default, environment, apns, ingest, rate_limits, delivery)"#
        ),
        BadFile(
            name: "unknown apns field",
            json: #""apns": {"key_file": "k.p8", "key_id": "ABC123DEFG", "team_id": "DEF123GHIJ", "keyid": "x"}"#,
            code: .unknownField,
            message:
                #"apps["com.example.game"].apns.keyid: unknown field (allowed here: key_file, key_id, team_id, certificate_file, certificate_password, private_key_file)"#
        ),
        BadFile(
            name: "unknown ingest field",
            json: #""ingest": {"apikeys": []}"#,
            code: .unknownField,
            message:
                #"apps["com.example.game"].ingest.apikeys: unknown field (allowed here: api_keys, credential, secret, secret_file, timestamp_window_s, push_token, max_activity_slots, new_tokens_per_minute)"#
        ),
        BadFile(
            name: "unknown rate limit field",
            json: #""rate_limits": {"per_device_per_day": 5}"#,
            code: .unknownField,
            message:
                #"apps["com.example.game"].rate_limits.per_device_per_day: unknown field (allowed here: per_device_per_hour, per_app_per_second, drop_low_priority)"#
        ),
    ]

    @Test(arguments: badFiles)
    func badFieldsAreNamedWithTheirApp(_ bad: BadFile) throws {
        let error = try #require(Self.error(decoding: Self.file(app: bad.json)))
        #expect(error.description == bad.message)
        #expect(error.code == bad.code)
        #expect(error.app == "com.example.game")
        #expect(error.field.hasPrefix(#"apps["com.example.game"]"#))
    }

    @Test(arguments: [
        ("com example", "the bundle id may contain only letters, digits, '-' and '.'"),
        ("com.example.", "the bundle id must not start or end with '.' or contain '..'"),
        ("com..example", "the bundle id must not start or end with '.' or contain '..'"),
        ("", "the bundle id must not be empty"),
        ("com.exämple", "the bundle id may contain only letters, digits, '-' and '.'"),
    ])
    func badBundleIDs(bundleID: String, reason: String) throws {
        let error = try #require(Self.error(decoding: Self.file(bundleID: bundleID)))
        #expect(error.code == .invalidValue)
        #expect(error.field == "apps[\"\(bundleID)\"]")
        #expect(error.reason == reason)
    }

    @Test func bundleIDsWithDigitsAndDashesAreFine() throws {
        let file = try AppsFile(json: Self.file(bundleID: "com.Example-2.game9"))
        #expect(file.app(bundleID: "com.Example-2.game9") != nil)
    }

    @Test(arguments: [
        ("not json", "not valid JSON"),
        ("[1, 2]", "the top level must be a JSON object with \"apps\""),
        ("\"apps\"", "the top level must be a JSON object with \"apps\""),
    ])
    func invalidJSON(text: String, reason: String) throws {
        let error = try #require(Self.error(decoding: Data(text.utf8)))
        #expect(error.code == .invalidJSON)
        #expect(error.field == "")
        #expect(error.app == nil)
        #expect(error.reason.hasPrefix(reason))
    }

    @Test func topLevelRules() throws {
        let missing = try #require(Self.error(decoding: Data("{}".utf8)))
        #expect(missing.description == "apps: is required")
        #expect(missing.code == .missingField)

        let empty = try #require(Self.error(decoding: Data(#"{"apps": {}}"#.utf8)))
        #expect(empty.description == "apps: must name at least one app")

        let array = try #require(Self.error(decoding: Data(#"{"apps": []}"#.utf8)))
        #expect(array.description == "apps: must be an object, got an array")
        #expect(array.code == .wrongType)

        let unknown = try #require(Self.error(decoding: Data(#"{"apps": {}, "version": 2}"#.utf8)))
        #expect(unknown.description == "version: unknown field (allowed here: apps)")
        #expect(unknown.code == .unknownField)

        let appNotObject = try #require(Self.error(decoding: Data(#"{"apps": {"com.example.game": "x"}}"#.utf8)))
        #expect(appNotObject.description == #"apps["com.example.game"]: must be an object, got a string"#)
        #expect(appNotObject.app == "com.example.game")

        let appNull = try #require(Self.error(decoding: Data(#"{"apps": {"com.example.game": null}}"#.utf8)))
        #expect(appNull.description == #"apps["com.example.game"]: must be an object, got null"#)
    }

    // MARK: Rules between apps

    static func twoApps(first: String, second: String) -> Data {
        Data(
            #"""
            {"apps": {
              "com.example.a": {\#(first)\#(first.isEmpty ? "" : ", ")"apns": \#(tokenAPNs)},
              "com.example.b": {\#(second)\#(second.isEmpty ? "" : ", ")"apns": \#(tokenAPNs)}
            }}
            """#.utf8
        )
    }

    @Test func atMostOneDefault() throws {
        let error = try #require(Self.error(decoding: Self.twoApps(first: #""default": true"#, second: #""default": true"#)))
        #expect(error.code == .conflict)
        #expect(error.description == #"apps["com.example.b"].default: only one app can be the default, and apps["com.example.a"] already is"#)
        #expect(error.app == "com.example.b")
    }

    @Test func aDisplayNameNamesOneApp() throws {
        let error = try #require(
            Self.error(decoding: Self.twoApps(first: #""display_names": ["Party"]"#, second: #""display_names": ["Other", "PARTY"]"#))
        )
        #expect(error.code == .conflict)
        #expect(
            error.description
                == #"apps["com.example.b"].display_names[1]: "PARTY" already names apps["com.example.a"] (names are compared case-insensitively)"#
        )
    }

    @Test func aDisplayNameCannotBeAnotherAppsBundleID() throws {
        let error = try #require(Self.error(decoding: Self.twoApps(first: #""display_names": ["com.example.B"]"#, second: "")))
        #expect(error.code == .conflict)
        #expect(error.field == #"apps["com.example.a"].display_names[0]"#)
    }

    @Test func anAppMayRepeatItsOwnBundleIDAsADisplayName() throws {
        let file = try AppsFile(json: Self.twoApps(first: #""display_names": ["COM.EXAMPLE.A", "A"]"#, second: ""))
        #expect(file.app(named: "a")?.bundleID == "com.example.a")
    }

    @Test func bundleIDsDifferingOnlyInCaseAreRejected() throws {
        let error = try #require(
            Self.error(
                decoding: Data(#"{"apps": {"com.example.a": {"apns": \#(Self.tokenAPNs)}, "COM.example.a": {"apns": \#(Self.tokenAPNs)}}}"#.utf8))
        )
        #expect(error.code == .conflict)
        #expect(error.reason.contains("only in case"))
    }

    // MARK: Lookups

    static let lookupFile = #"""
        {"apps": {
          "com.example.game": {"display_names": ["Monopoly Party", "Game"], "default": true, "apns": \#(tokenAPNs)},
          "com.example.shop": {"display_names": ["Shop"], "apns": \#(tokenAPNs)}
        }}
        """#

    @Test func lookupByBundleIDIsExact() throws {
        let file = try Self.decode(Self.lookupFile)
        #expect(file.app(bundleID: "com.example.shop")?.bundleID == "com.example.shop")
        #expect(file.app(bundleID: "COM.EXAMPLE.SHOP") == nil)
        #expect(file.app(bundleID: "Shop") == nil)
    }

    @Test(arguments: [
        ("com.example.shop", "com.example.shop"),
        ("COM.Example.Shop", "com.example.shop"),
        ("shop", "com.example.shop"),
        ("monopoly party", "com.example.game"),
        ("MONOPOLY PARTY", "com.example.game"),
        ("Game", "com.example.game"),
    ])
    func lookupByLegacyNameIgnoresCase(name: String, bundleID: String) throws {
        let file = try Self.decode(Self.lookupFile)
        #expect(file.app(named: name)?.bundleID == bundleID)
    }

    @Test func legacyRegistrationFallsBackToTheDefaultApp() throws {
        let file = try Self.decode(Self.lookupFile)
        #expect(file.defaultApp?.bundleID == "com.example.game")
        #expect(file.appForLegacyRegistration(appName: "Shop")?.bundleID == "com.example.shop")
        #expect(file.appForLegacyRegistration(appName: "Unknown App")?.bundleID == "com.example.game")
        #expect(file.appForLegacyRegistration(appName: "")?.bundleID == "com.example.game")
        #expect(file.appForLegacyRegistration(appName: nil)?.bundleID == "com.example.game")
        #expect(file.app(named: "Unknown App") == nil)
    }

    @Test func legacyRegistrationWithoutADefaultApp() throws {
        let file = try AppsFile(json: Self.twoApps(first: "", second: ""))
        #expect(file.defaultApp == nil)
        #expect(file.appForLegacyRegistration(appName: "nothing") == nil)
        #expect(file.appForLegacyRegistration(appName: "com.example.b")?.bundleID == "com.example.b")
    }

    // MARK: Built in code

    @Test func appsBuiltInCodeAreCheckedToo() throws {
        let good = AppConfiguration(
            bundleID: "com.example.game",
            apns: .token(.init(keyFile: "k.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ"))
        )
        let file = try AppsFile(apps: [good])
        #expect(file.app(bundleID: "com.example.game") == good)

        var badKey = good
        badKey.apns = .token(.init(keyFile: "k.p8", keyID: "ABC123DEFG", teamID: "short"))
        #expect(throws: AppsFileError.self) { try AppsFile(apps: [badKey]) }

        var duplicate = good
        duplicate.displayNames = ["x"]
        do {
            _ = try AppsFile(apps: [good, duplicate])
            Issue.record("a duplicate bundle id was accepted")
        } catch {
            #expect(error.code == .conflict)
            #expect(error.description == #"apps["com.example.game"]: the bundle id appears twice"#)
        }

        #expect(throws: AppsFileError.self) { try AppsFile(apps: []) }
    }

    // MARK: Messages

    @Test func errorsNameTheFileWhenGivenOne() throws {
        let error = try #require(Self.error(decoding: Self.file(app: #""environment": "prod""#)))
        #expect(
            error.withFile("config/apps.json").description
                == #"config/apps.json: apps["com.example.game"].environment: must be "production" or "sandbox", got "prod""#
        )
        #expect(error.withFile("config/apps.json").file == "config/apps.json")
    }

    @Test func descriptionsLeaveSecretsOut() throws {
        let pkcs12 = AppConfiguration.APNsCredentials.pkcs12(certificateFile: "c.p12", password: "hunter2")
        #expect(!"\(pkcs12)".contains("hunter2"))
        let ingest = AppConfiguration.Ingest(apiKeys: ["key-abc"], credential: .hmacSHA256, secret: "shh")
        #expect(!"\(ingest)".contains("key-abc"))
        #expect(!"\(ingest)".contains("shh"))

        let error = try #require(
            Self.error(decoding: Self.file(app: #""ingest": {"api_keys": ["very-secret-key"], "credential": "bad", "secret": "s3"}"#))
        )
        #expect(!error.description.contains("very-secret-key"))
        #expect(!error.description.contains("s3\""))
    }

    // MARK: The example file

    @Test func theExampleAppsFileDecodes() throws {
        var root = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { root.deleteLastPathComponent() }
        let path = root.appendingPathComponent("config/apps.json").path
        let data = try #require(FileManager.default.contents(atPath: path))
        let file = try AppsFile(json: data, directory: "config")
        let app = try #require(file.app(bundleID: "com.example.game"))
        #expect(app.apns == .token(.init(keyFile: "config/keys/AuthKey_DEVKEY0001.p8", keyID: "DEVKEY0001", teamID: "DEVTEAM001")))
        #expect(app.ingest.apiKeys == ["dev-ingest-key"])
        #expect(app.ingest.credential == .hmacSHA256, "md5 needs no secret: the example does not ship it")
        #expect(app.ingest.secretFile == "config/keys/ingest-secret", "the secret is made by make run, never committed")
        #expect(file.appForLegacyRegistration(appName: nil)?.bundleID == "com.example.game")
    }
}
