import Crypto
import PushCore

/// A legacy `/register` request (CONTRACT.md, "Legacy client forms"), decoded and checked; pure, so the
/// whole legacy surface is testable without a server.
///
/// ```
/// /register?device_token=<hex or NSData description>&device_uuid=…&device_name=…&device_version=…
///   &app_name=…&timestamp=<ms>&push_badge=enabled&push_alert=enabled&push_sound=disabled&credential=…
/// ```
///
/// - `device_token` (required): normalised like the API's token (`<`, `>` and spaces stripped, any case).
/// - `device_uuid` → `device.uuid`, `device_name` → `device.name`, `device_version` →
///   `device.os_version`; an empty value counts as absent (old clients send empty values for unknowns).
/// - `push_badge`, `push_alert`, `push_sound`: `enabled` or `disabled` (any case); absent or empty is
///   enabled, like ``PushCore/NotificationSettings``'s defaults.
/// - `app_name`: a bundle id or display name; otherwise the default app takes the registration.
/// - `timestamp` and `credential`: checked by ``verify(ingest:nowMilliseconds:)``.
struct LegacyRegistrationForm: Sendable, Equatable {
    /// `device_token` exactly as sent (after URL decoding): what the client hashed.
    var rawToken: String
    var token: DeviceToken
    var registration: DeviceRegistration
    /// `device_uuid` as sent (an empty string when absent): part of the credential message.
    var rawUUID: String
    var appName: String?
    /// `timestamp` as sent, when present: part of the credential message.
    var rawTimestamp: String?
    /// `timestamp` read as ms since 1970, when present (its shape is checked for every app, whether
    /// or not the app's credential reads it).
    var timestamp: Int64?
    var credential: String?

    /// The legacy parameter behind each registration field, for error messages.
    private static let legacyFieldNames = [
        "device.uuid": "device_uuid", "device.name": "device_name", "device.os_version": "device_version",
        "settings.badge": "push_badge", "settings.alert": "push_alert", "settings.sound": "push_sound",
    ]

    /// Decodes the parameters of `/register`.
    ///
    /// - Throws: ``PushCore/RegistrationError`` naming the legacy parameter (`device_token`, `push_sound`, …).
    init(parameters: FormParameters) throws(RegistrationError) {
        guard let rawToken = parameters["device_token"], !rawToken.isEmpty else {
            throw RegistrationError(.missingField, field: "device_token", "is required")
        }
        self.rawToken = rawToken
        token = try DeviceToken(normalizing: rawToken, field: "device_token")
        rawUUID = parameters["device_uuid"] ?? ""
        appName = parameters["app_name"].flatMap { $0.isEmpty ? nil : $0 }
        rawTimestamp = parameters["timestamp"].flatMap { $0.isEmpty ? nil : $0 }
        if let rawTimestamp {
            guard rawTimestamp.utf8.count <= 16, rawTimestamp.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = Int64(rawTimestamp)
            else {
                throw RegistrationError(
                    .invalidField, field: "timestamp", "must be a whole number of ms since 1970, got \(Self.quoted(rawTimestamp))")
            }
            timestamp = value
        }
        credential = parameters["credential"].flatMap { $0.isEmpty ? nil : $0 }

        var device: [String: Any] = [:]
        for (parameter, field) in [("device_uuid", "uuid"), ("device_name", "name"), ("device_version", "os_version")] {
            if let value = parameters[parameter], !value.isEmpty { device[field] = value }
        }
        var settings: [String: Any] = [:]
        for (parameter, field) in [("push_badge", "badge"), ("push_alert", "alert"), ("push_sound", "sound")] {
            guard let value = parameters[parameter], !value.isEmpty else { continue }
            switch value.lowercased() {
            case "enabled": settings[field] = true
            case "disabled": settings[field] = false
            default:
                throw RegistrationError(.invalidField, field: parameter, "must be \"enabled\" or \"disabled\", got \(Self.quoted(value))")
            }
        }
        do {
            registration = try DeviceRegistration(json: ["device": device, "settings": settings])
        } catch {
            throw RegistrationError(error.code, field: Self.legacyFieldNames[error.field] ?? error.field, error.reason)
        }
    }

    /// Checks `timestamp` and `credential` as `ingest` configures:
    ///
    /// - `none`: neither is checked (anyone can register; use it for benchmarks and trusted networks).
    /// - `md5`: `credential` = lowercase hex MD5 of `device_token + device_uuid + timestamp`.
    /// - `hmac-sha256`: `credential` = lowercase hex HMAC-SHA256, keyed with the UTF-8 bytes of
    ///   `ingest.secret`, of the same message.
    ///
    /// The message is the UTF-8 bytes of the three parameters as sent (URL-decoded), concatenated with
    /// no separator; `device_uuid` may be empty. Clients that hash the normalised token (lowercase hex
    /// without `<`, `>` and spaces) while sending another spelling are accepted too. The credential is
    /// compared case-insensitively and in constant time, against both spellings every time.
    ///
    /// For `md5` and `hmac-sha256`, `timestamp` (ms since 1970) is required and must lie within
    /// `ingest.timestampWindow` of `nowMilliseconds`, so a captured request stops working after the
    /// window. Within it a replay re-registers the same token with the same data, which changes
    /// nothing but `updated_at`.
    func verify(ingest: AppConfiguration.Ingest, nowMilliseconds: Int64) throws(IngestError) {
        if ingest.credential == .none {
            return
        }
        if ingest.credential == .hmacSHA256, (ingest.secret ?? "").isEmpty {
            throw IngestError(
                .forbidden, field: "credential",
                "legacy registration is not set up for this app: name ingest.credential in the apps file (\"hmac-sha256\" with a secret; \"md5\" only for clients that cannot change)"
            )
        }
        guard let rawTimestamp, let timestamp else {
            throw IngestError(.invalidRequest(.missingField), field: "timestamp", "is required (ms since 1970)")
        }
        // Saturating: the apps file bounds the window, but no value may trap here.
        let (windowSeconds, _) = ingest.timestampWindow.components
        let windowMilliseconds = min(max(windowSeconds, 0), Int64(AppConfiguration.Ingest.maximumTimestampWindowSeconds)) * 1000
        let (skew, _) = timestamp.subtractingReportingOverflow(nowMilliseconds)
        if skew.magnitude > UInt64(windowMilliseconds) {
            let hint = timestamp < 100_000_000_000 ? " (it looks like seconds; send milliseconds)" : ""
            throw IngestError(
                .staleTimestamp,
                field: "timestamp",
                "is \(skew.magnitude / 1000) s \(skew < 0 ? "in the past" : "in the future"), outside the \(windowMilliseconds / 1000) s window\(hint)"
            )
        }
        guard let credential else {
            throw IngestError(.badCredential, field: "credential", "is required for this app (\(ingest.credential.rawValue))")
        }
        let presented = Array(credential.lowercased().utf8)
        var matched = false
        for tokenSpelling in [rawToken, token.hex] {
            let message = Array((tokenSpelling + rawUUID + rawTimestamp).utf8)
            let expected = Self.credential(for: message, mode: ingest.credential, secret: ingest.secret ?? "")
            matched = ConstantTime.equals(expected, presented) || matched
        }
        if !matched {
            throw IngestError(
                .badCredential, field: "credential", "does not match (\(ingest.credential.rawValue) of device_token + device_uuid + timestamp)")
        }
    }

    /// The lowercase hex credential a client computes for `message`.
    static func credential(for message: [UInt8], mode: AppConfiguration.Credential, secret: String) -> [UInt8] {
        switch mode {
        case .md5:
            hex(Insecure.MD5.hash(data: message))
        case .hmacSHA256:
            hex(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: Array(secret.utf8))))
        case .none:
            []
        }
    }

    private static func hex(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        let digits = Array("0123456789abcdef".utf8)
        var result: [UInt8] = []
        for byte in bytes {
            result.append(digits[Int(byte >> 4)])
            result.append(digits[Int(byte & 0x0F)])
        }
        return result
    }

    static func quoted(_ text: String) -> String {
        let shown = text.count > 64 ? String(text.prefix(64)) + "…" : text
        return "\"\(shown.unicodeScalars.map { $0.escaped(asASCII: false) }.joined())\""
    }
}

/// A legacy `POST /push_token` request: `username=…&token=…` (CONTRACT.md), registering `token` for the
/// default app with `user` = `username`.
///
/// - `token` (required): normalised like every token.
/// - `username`: the user; empty or absent registers the device without a user (an app that is not
///   logged in yet), checked like the API's `user` (at most 256 characters, no control characters).
///
/// No credential: the form never had one. So it answers only for a default app whose apps-file entry
/// sets `ingest.push_token: true`, and each username gets at most
/// ``PushCore/AppConfiguration/Ingest/pushTokenPerUserPerMinute`` registrations a minute.
struct LegacyPushTokenForm: Sendable, Equatable {
    var token: DeviceToken
    var registration: DeviceRegistration

    /// - Throws: ``PushCore/RegistrationError`` naming `token` or `username`.
    init(parameters: FormParameters) throws(RegistrationError) {
        guard let rawToken = parameters["token"], !rawToken.isEmpty else {
            throw RegistrationError(.missingField, field: "token", "is required")
        }
        token = try DeviceToken(normalizing: rawToken, field: "token")
        var json: [String: Any] = [:]
        if let username = parameters["username"], !username.isEmpty {
            json["user"] = username
        }
        do {
            registration = try DeviceRegistration(json: json)
        } catch {
            throw RegistrationError(error.code, field: error.field == "user" ? "username" : error.field, error.reason)
        }
    }
}
