import PushCore
import Testing

@testable import PushIngest

/// The pure parts behind the HTTP surface: form decoding, legacy parameters, credentials (pinned to
/// values computed independently with Python's `hashlib`/`hmac`), the timestamp window, constant-time
/// comparison, bearer keys, error answers and the failure-log throttle. No server.
@Suite struct HTTPLegacyFormParsingTests {
    static let token = "740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad"
    static let uuid = "6D5A1F3C-2B8E-4E0F-9C57-2E8B3A0D4F11"
    static let timestamp = "1718000000000"
    /// `python3 -c 'import hashlib; print(hashlib.md5((token + uuid + timestamp).encode()).hexdigest())'`
    static let md5 = "3da25fbb912fc6ef236f5ad9296e65b6"
    /// `hmac.new(b"shop-secret-0123456789", (token + uuid + timestamp).encode(), hashlib.sha256).hexdigest()`
    static let hmac = "f73022ba6ca6949bf312fe93d0987bf58aa0d52ba471b3fc4062c6bda7760f3e"

    static func parameters(_ query: String) throws(RegistrationError) -> FormParameters {
        try FormParameters(urlEncoded: Array(query.utf8))
    }

    // MARK: Form decoding

    @Test func formDecodingHandlesPlusPercentAndUTF8() throws {
        let form = try Self.parameters("device_name=Jenna%27s+iPhone&app_name=Caf%C3%A9&empty=&flag&a%20b=c")
        #expect(form["device_name"] == "Jenna's iPhone")
        #expect(form["app_name"] == "Café")
        #expect(form["empty"] == "")
        #expect(form["flag"] == "")
        #expect(form["a b"] == "c")
        #expect(form["missing"] == nil)
    }

    @Test func aNameGivenTwiceKeepsItsFirstValueAndMergingPrefersTheReceiver() throws {
        let form = try Self.parameters("user=a&user=b")
        #expect(form["user"] == "a")
        let merged = try Self.parameters("user=body").merging(try Self.parameters("user=query&extra=1"))
        #expect(merged["user"] == "body")
        #expect(merged["extra"] == "1")
    }

    @Test(arguments: ["device_uuid=%", "device_uuid=%4", "device_uuid=%G1", "device_uuid=%FF%FE"])
    func brokenEncodingIsAnErrorNamingTheParameter(_ query: String) {
        #expect(throws: RegistrationError.self) { try Self.parameters(query) }
        do throws(RegistrationError) {
            _ = try Self.parameters(query)
        } catch {
            #expect(error.field == "device_uuid")
        }
    }

    @Test func tooManyParametersAreRefused() {
        let query = (0...FormParameters.maximumCount).map { "p\($0)=1" }.joined(separator: "&")
        #expect(throws: RegistrationError.self) { try Self.parameters(query) }
    }

    // MARK: Legacy parameters

    @Test func allTenParametersMapOntoTheRegistration() throws {
        let form = try LegacyRegistrationForm(
            parameters: Self.parameters(
                "device_token=\(Self.token)&device_uuid=\(Self.uuid)&device_name=iPad&device_version=17.5&app_name=Shop"
                    + "&timestamp=\(Self.timestamp)&push_badge=disabled&push_alert=Enabled&push_sound=DISABLED&credential=\(Self.md5)"
            )
        )
        #expect(form.token.hex == Self.token)
        #expect(form.appName == "Shop")
        #expect(form.rawTimestamp == Self.timestamp)
        #expect(form.credential == Self.md5)
        #expect(form.registration.device == DeviceInfo(uuid: Self.uuid, name: "iPad", osVersion: "17.5"))
        #expect(form.registration.settings == NotificationSettings(alert: true, badge: false, sound: false))
        #expect(form.registration.user == nil)
    }

    /// A device name with an escape sequence is refused naming the legacy parameter, not stored to
    /// reach an operator's terminal later.
    @Test func controlCharactersInDeviceFieldsAreRefused() throws {
        #expect {
            _ = try LegacyRegistrationForm(parameters: Self.parameters("device_token=\(Self.token)&device_name=x%1B%5B2J"))
        } throws: { error in
            "\(error)".contains("device_name") && "\(error)".contains("control characters")
        }
    }

    /// A timestamp that is not ms since 1970 is refused for every app, including one whose
    /// credential (`none`) does not read it: a client sending garbage learns so at once.
    @Test(arguments: ["%C2%84", "17672256000000001", "1767225600.5", "-1"])
    func aMalformedTimestampIsRefusedWhateverTheCredential(_ timestamp: String) throws {
        #expect {
            _ = try LegacyRegistrationForm(parameters: Self.parameters("device_token=\(Self.token)&timestamp=\(timestamp)"))
        } throws: { error in
            "\(error)".contains("timestamp: must be a whole number of ms since 1970")
        }
    }

    @Test func emptyValuesCountAsAbsent() throws {
        let form = try LegacyRegistrationForm(parameters: Self.parameters("device_token=\(Self.token)&device_name=&push_sound=&app_name="))
        #expect(form.registration.device == DeviceInfo())
        #expect(form.registration.settings == NotificationSettings())
        #expect(form.appName == nil)
    }

    // MARK: Credentials

    @Test func credentialsMatchIndependentlyComputedValues() {
        let message = Array((Self.token + Self.uuid + Self.timestamp).utf8)
        #expect(String(decoding: LegacyRegistrationForm.credential(for: message, mode: .md5, secret: ""), as: UTF8.self) == Self.md5)
        #expect(
            String(decoding: LegacyRegistrationForm.credential(for: message, mode: .hmacSHA256, secret: "shop-secret-0123456789"), as: UTF8.self)
                == Self.hmac
        )
    }

    static func form(credential: String, token: String = token, timestamp: String = timestamp) throws -> LegacyRegistrationForm {
        try LegacyRegistrationForm(
            parameters: parameters("device_token=\(token)&device_uuid=\(uuid)&timestamp=\(timestamp)&credential=\(credential)")
        )
    }

    static let now: Int64 = 1_718_000_000_000
    static let md5App = AppConfiguration.Ingest(credential: .md5, timestampWindow: .seconds(300))
    static let hmacApp = AppConfiguration.Ingest(credential: .hmacSHA256, secret: "shop-secret-0123456789", timestampWindow: .seconds(300))

    @Test func verificationAcceptsTheRightCredentialInAnyCase() throws {
        try Self.form(credential: Self.md5).verify(ingest: Self.md5App, nowMilliseconds: Self.now)
        try Self.form(credential: Self.md5.uppercased()).verify(ingest: Self.md5App, nowMilliseconds: Self.now)
        try Self.form(credential: Self.hmac).verify(ingest: Self.hmacApp, nowMilliseconds: Self.now)
    }

    @Test func verificationRefusesWrongCredentialsAsBadCredential() throws {
        for (credential, app) in [(Self.hmac, Self.md5App), (Self.md5, Self.hmacApp), (String(Self.md5.dropLast()), Self.md5App), ("", Self.md5App)] {
            let error = #expect(throws: IngestError.self) { try Self.form(credential: credential).verify(ingest: app, nowMilliseconds: Self.now) }
            #expect(error?.code == .badCredential)
            #expect(error?.legacyReturnCode == 2)
            #expect(error?.field == "credential")
        }
    }

    @Test func theTimestampWindowIsInclusiveAndBothWays() throws {
        let edge = Self.now + 300_000
        let atEdge = try Self.form(credential: "", timestamp: Self.timestamp)
        // 300 s either side is accepted (the credential check comes after the window check).
        for now in [Self.now - 300_000, edge] {
            let error = #expect(throws: IngestError.self) { try atEdge.verify(ingest: Self.md5App, nowMilliseconds: now) }
            #expect(error?.code == .badCredential)
        }
        for now in [Self.now - 300_001, edge + 1] {
            let error = #expect(throws: IngestError.self) { try atEdge.verify(ingest: Self.md5App, nowMilliseconds: now) }
            #expect(error?.code == .staleTimestamp)
            #expect(error?.legacyReturnCode == 3)
        }
    }

    @Test func credentialNoneChecksNothing() throws {
        let form = try LegacyRegistrationForm(parameters: Self.parameters("device_token=\(Self.token)"))
        try form.verify(ingest: AppConfiguration.Ingest(credential: .none), nowMilliseconds: Self.now)
        let missing = #expect(throws: IngestError.self) { try form.verify(ingest: Self.md5App, nowMilliseconds: Self.now) }
        #expect(missing?.field == "timestamp")
        #expect(missing?.legacyReturnCode == 1)
    }

    @Test func pushTokenMapsUsernameAndNamesItsFields() throws {
        let form = try LegacyPushTokenForm(parameters: Self.parameters("username=alice&token=\(Self.token)"))
        #expect(form.registration.user == "alice")
        let anonymous = try LegacyPushTokenForm(parameters: Self.parameters("username=&token=\(Self.token)"))
        #expect(anonymous.registration.user == nil)
        do throws(RegistrationError) {
            _ = try LegacyPushTokenForm(parameters: Self.parameters("username=\(String(repeating: "u", count: 300))&token=\(Self.token)"))
            Issue.record("a 300-character username was accepted")
        } catch {
            #expect(error.field == "username")
        }
    }

    // MARK: Comparisons and keys

    @Test func constantTimeEqualityIsPlainEquality() {
        #expect(ConstantTime.equals("abc", "abc"))
        #expect(!ConstantTime.equals("abc", "abd"))
        #expect(!ConstantTime.equals("abc", "ab"))
        #expect(!ConstantTime.equals("", "a"))
        #expect(ConstantTime.equals("", ""))
        #expect(!ConstantTime.equals([UInt8](repeating: 0, count: 256), [UInt8](repeating: 0, count: 512)))
    }

    @Test func bearerKeysAcceptExactlyTheirKeys() {
        let keys = BearerKeys(["key-one", "key-two"])
        #expect(keys.accepts("key-one"))
        #expect(keys.accepts("key-two"))
        #expect(!keys.accepts("key-three"))
        #expect(!keys.accepts("key-on"))
        #expect(!keys.accepts("KEY-ONE"))
        #expect(!BearerKeys([]).accepts(""))
    }

    @Test func errorsCarryTheirStatusRetAndRetryAfter() {
        let limited = IngestError(.rateLimited, "slow down", retryAfter: .milliseconds(1200))
        #expect(limited.status == 429)
        #expect(limited.legacyReturnCode == 5)
        #expect(limited.retryAfterSeconds == 2)
        #expect(IngestError(.rateLimited, "x", retryAfter: .microseconds(1)).retryAfterSeconds == 1)
        #expect(limited.jsonBody == #"{"error":"rate_limited","message":"slow down"}"#)
        let field = IngestError(RegistrationError(.invalidField, field: "user", "must not contain \"quotes\"\n"))
        #expect(field.status == 400)
        #expect(field.jsonBody == #"{"error":"invalid_field","message":"user: must not contain \"quotes\"\n"}"#)
        #expect(IngestError(.unavailable, "down").legacyJSONBody == #"{"ret":6,"msg":"down"}"#)
    }

    @Test func theFailureLogLetsOneLineThroughPerIntervalAndCountsTheRest() {
        let throttle = LogThrottle(interval: .seconds(1))
        let start = ContinuousClock.now
        #expect(throttle.admit(now: start) == 0)
        #expect(throttle.admit(now: start + .milliseconds(10)) == nil)
        #expect(throttle.admit(now: start + .milliseconds(999)) == nil)
        #expect(throttle.admit(now: start + .seconds(1)) == 2)
        #expect(throttle.admit(now: start + .seconds(3)) == 0)
    }
}
