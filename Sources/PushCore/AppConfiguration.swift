/// One app of the apps file (CONTRACT.md, "Apps file"): its APNs credentials, ingest keys and limits.
///
/// The apps file keys apps by bundle id; every field except `apns` has a default:
///
/// | field | default |
/// |---|---|
/// | `display_names` | `[]` |
/// | `default` | `false` |
/// | `environment` | `production` |
/// | `ingest.api_keys` | `[]` (the HTTP API accepts no key for this app; the legacy forms still work) |
/// | `ingest.credential` | `hmac-sha256`; `md5` only where an app names it (what old clients send) |
/// | `ingest.secret` | none (required when `credential` is named `hmac-sha256`; without it, an app that names no credential refuses the legacy `/register`) |
/// | `ingest.timestamp_window_s` | `300` |
/// | `rate_limits.per_device_per_hour` | `60` |
/// | `rate_limits.per_app_per_second` | `5000` |
/// | `rate_limits.drop_low_priority` | `false` (rate-limited notifications wait in push-send's retry tiers) |
/// | `delivery.guarantee` | `at-least-once` (after a crash of push-send a notification may arrive twice, never not at all) |
/// | `delivery.collapse_id_from_request` | `true` (a notification without `collapse_id` gets one derived from the request id) |
///
/// Values built in code are checked with ``validate()``; ``AppsFile`` checks every app it holds.
public struct AppConfiguration: Sendable, Equatable {
    /// The bundle id: the key in the apps file and the `apns-topic` of the app's notifications.
    public var bundleID: String
    /// Other names the legacy registration forms may use in `app_name` (matched case-insensitively).
    public var displayNames: [String]
    /// Whether legacy registrations whose `app_name` matches no app go to this app (at most one app).
    public var isDefault: Bool
    /// The APNs environment of devices that register without one.
    public var environment: Environment
    /// How the app authenticates to APNs. File paths are resolved relative to the apps file's directory.
    public var apns: APNsCredentials
    /// How push-ingest authenticates registrations for this app.
    public var ingest: Ingest
    /// Rate limits push-send applies to this app.
    public var rateLimits: RateLimits
    /// What push-send promises about twins and gaps for this app.
    public var delivery: Delivery

    public init(
        bundleID: String,
        displayNames: [String] = [],
        isDefault: Bool = false,
        environment: Environment = .production,
        apns: APNsCredentials,
        ingest: Ingest = Ingest(),
        rateLimits: RateLimits = RateLimits(),
        delivery: Delivery = Delivery()
    ) {
        self.bundleID = bundleID
        self.displayNames = displayNames
        self.isDefault = isDefault
        self.environment = environment
        self.apns = apns
        self.ingest = ingest
        self.rateLimits = rateLimits
        self.delivery = delivery
    }
}

extension AppConfiguration {
    /// The APNs environment: `production` (`api.push.apple.com`) or `sandbox` (`api.sandbox.push.apple.com`).
    public enum Environment: String, Sendable, Hashable, CaseIterable {
        case production
        case sandbox
    }

    /// APNs credentials: token auth (a `.p8` signing key) or a client certificate.
    ///
    /// In the apps file: `{"key_file", "key_id", "team_id"}`, `{"certificate_file": "….p12",
    /// "certificate_password"}` (password optional, default empty) or `{"certificate_file": "….pem",
    /// "private_key_file"}`. The forms cannot be mixed.
    public enum APNsCredentials: Sendable, Equatable {
        /// Token auth: ES256 JWTs signed with the key in `keyFile`.
        case token(TokenKey)
        /// A PKCS#12 bundle holding the certificate and its private key.
        case pkcs12(certificateFile: String, password: String)
        /// A PEM certificate (chain) with its PEM private key in a separate file.
        case pem(certificateFile: String, privateKeyFile: String)
    }

    /// A token-auth signing key: the `.p8` file, its 10-character key id and the 10-character team id.
    public struct TokenKey: Sendable, Hashable {
        /// The `.p8` file holding the PKCS#8 EC private key.
        public var keyFile: String
        /// The key id (`kid`) Apple assigned, 10 letters or digits.
        public var keyID: String
        /// The team id (`iss`), 10 letters or digits.
        public var teamID: String

        public init(keyFile: String, keyID: String, teamID: String) {
            self.keyFile = keyFile
            self.keyID = keyID
            self.teamID = teamID
        }
    }

    /// How registrations for the app are authenticated (`ingest` in the apps file).
    public struct Ingest: Sendable, Equatable {
        /// The default of ``timestampWindow``: 300 seconds.
        public static let defaultTimestampWindow: Duration = .seconds(300)

        /// The longest `timestamp_window_s`: a day (a replayed request is refused within twice the window).
        public static let maximumTimestampWindowSeconds = 86_400
        /// `POST /push_token` registrations one username may make per minute.
        public static let pushTokenPerUserPerMinute = 10
        /// The default of ``newTokensPerMinute``.
        public static let defaultNewTokensPerMinute = 60_000
        /// The default of ``maxActivitySlots``.
        public static let defaultMaxActivitySlots = 128
        /// The largest `max_activity_slots`.
        public static let maximumActivitySlots = 10_000

        /// Bearer keys accepted by the registration HTTP API (`api_keys`, default none).
        public var apiKeys: [String]

        /// How the legacy forms' `credential` parameter is checked (`credential`, default `hmac-sha256`;
        /// `md5` only where an app names it).
        public var credential: Credential
        /// The HMAC key for ``Credential/hmacSHA256`` (`secret`, default none; or read from
        /// ``secretFile`` when the apps file is loaded).
        public var secret: String?
        /// A file holding ``secret`` (`secret_file`, relative to the apps file), so the apps file can
        /// be committed without it.
        public var secretFile: String?
        /// How far a legacy registration's `timestamp` may be from now (`timestamp_window_s`, default 300).
        public var timestampWindow: Duration
        /// Whether the legacy `POST /push_token` (a username bound to a token with no credential)
        /// registers for this app, when it is the default app (`push_token`, default false).
        public var pushToken: Bool
        /// The most Live Activity slots one device may hold
        /// (`max_activity_slots`, default 128): a new one beyond them is refused, so an app's key
        /// cannot make one device's registry entry grow without bound.
        public var maxActivitySlots: Int
        /// Tokens the registry does not hold yet that this app may gain a minute, over every client
        /// (`new_tokens_per_minute`, default 60,000; 0 = no budget): random tokens sent with the app's
        /// key (shipped inside the app) cannot grow Redis until it is full.
        public var newTokensPerMinute: Int

        public init(
            apiKeys: [String] = [],
            credential: Credential = .hmacSHA256,
            secret: String? = nil,
            secretFile: String? = nil,
            timestampWindow: Duration = Ingest.defaultTimestampWindow,
            pushToken: Bool = false,
            maxActivitySlots: Int = Ingest.defaultMaxActivitySlots,
            newTokensPerMinute: Int = Ingest.defaultNewTokensPerMinute
        ) {
            self.maxActivitySlots = maxActivitySlots
            self.newTokensPerMinute = newTokensPerMinute
            self.apiKeys = apiKeys
            self.credential = credential
            self.secret = secret
            self.secretFile = secretFile
            self.timestampWindow = timestampWindow
            self.pushToken = pushToken
        }
    }

    /// The check applied to the legacy forms' `credential` parameter.
    ///
    /// The default is `hmac-sha256`: an app that names no credential and has no `secret` refuses the
    /// legacy `/register` (nothing can be checked), rather than falling back to `md5`, which anyone who
    /// has seen the formula can forge.
    public enum Credential: String, Sendable, Hashable, CaseIterable {
        /// Lowercase hex MD5 of `device_token + device_uuid + timestamp` (compatibility only: no secret).
        case md5
        /// HMAC-SHA256 keyed with the app's ``Ingest/secret``.
        case hmacSHA256 = "hmac-sha256"
        /// No credential is checked.
        case none
    }

    /// Rate limits (`rate_limits` in the apps file); each at least 1.
    ///
    /// Over a limit push-send defers a notification through its retry tiers rather than dropping it;
    /// with ``dropLowPriority`` an app lets push-send drop its priority-1 notifications instead (they
    /// are reported as `failed.RateLimited`).
    public struct RateLimits: Sendable, Hashable {
        /// The default of ``perDevicePerHour``: 60.
        public static let defaultPerDevicePerHour = 60
        /// The default of ``perAppPerSecond``: 5000.
        public static let defaultPerAppPerSecond = 5000

        /// Notifications one device may receive per hour (`per_device_per_hour`, default 60).
        public var perDevicePerHour: Int
        /// Notifications the app may send per second (`per_app_per_second`, default 5000).
        public var perAppPerSecond: Int
        /// Whether rate-limited notifications of priority 1 are dropped instead of deferred
        /// (`drop_low_priority`, default false).
        public var dropLowPriority: Bool

        public init(
            perDevicePerHour: Int = RateLimits.defaultPerDevicePerHour,
            perAppPerSecond: Int = RateLimits.defaultPerAppPerSecond,
            dropLowPriority: Bool = false
        ) {
            self.perDevicePerHour = perDevicePerHour
            self.perAppPerSecond = perAppPerSecond
            self.dropLowPriority = dropLowPriority
        }
    }
}

extension AppConfiguration {
    /// What push-send promises when it cannot know whether APNs accepted a notification (`delivery`
    /// in the apps file): push-send crashed, or the connection died, while the answer was on the wire.
    public struct Delivery: Sendable, Hashable {
        public enum Guarantee: String, Sendable, Hashable {
            /// Send again: never a gap, at worst a twin (which the collapse id folds on the device).
            case atLeastOnce = "at-least-once"
            /// Never send again: report `failed.Unknown` instead; never a twin, at worst a gap.
            case atMostOnce = "at-most-once"
        }

        /// `delivery.guarantee`, default `at-least-once`.
        public var guarantee: Guarantee
        /// `delivery.collapse_id_from_request`, default true: a notification whose request named no
        /// `collapse_id` is sent with one derived from the request id, so a twin replaces the first
        /// on the device instead of showing twice.
        public var collapseIDFromRequest: Bool

        public init(guarantee: Guarantee = .atLeastOnce, collapseIDFromRequest: Bool = true) {
            self.guarantee = guarantee
            self.collapseIDFromRequest = collapseIDFromRequest
        }
    }
}

// MARK: - Validation

extension AppConfiguration {
    /// Checks the values (bundle id, key and team ids, names, secrets, limits) and throws an
    /// ``AppsFileError`` naming the app and the field, e.g.
    /// `apps["com.example.game"].apns.key_id: must be 10 characters (letters and digits), got "ABC"`.
    public func validate() throws(AppsFileError) {
        let app = AppsFileError.appPath(bundleID)
        if let problem = Self.bundleIDProblem(bundleID) {
            throw AppsFileError(.invalidValue, field: app, app: bundleID, reason: problem)
        }
        for (index, name) in displayNames.enumerated() where name.allSatisfy(\.isWhitespace) {
            throw AppsFileError(
                .invalidValue,
                field: "\(app).display_names[\(index)]",
                app: bundleID,
                reason: "must not be empty"
            )
        }
        switch apns {
        case .token(let key):
            try Self.requireFile(key.keyFile, field: "\(app).apns.key_file", app: bundleID)
            try Self.requireTenCharacterID(key.keyID, field: "\(app).apns.key_id", app: bundleID)
            try Self.requireTenCharacterID(key.teamID, field: "\(app).apns.team_id", app: bundleID)
        case .pkcs12(let certificateFile, _):
            try Self.requireFile(certificateFile, field: "\(app).apns.certificate_file", app: bundleID)
        case .pem(let certificateFile, let privateKeyFile):
            try Self.requireFile(certificateFile, field: "\(app).apns.certificate_file", app: bundleID)
            try Self.requireFile(privateKeyFile, field: "\(app).apns.private_key_file", app: bundleID)
        }
        for (index, key) in ingest.apiKeys.enumerated() where key.allSatisfy(\.isWhitespace) {
            throw AppsFileError(
                .invalidValue,
                field: "\(app).ingest.api_keys[\(index)]",
                app: bundleID,
                reason: "must not be empty"
            )
        }
        if ingest.timestampWindow <= .zero {
            throw AppsFileError(
                .invalidValue,
                field: "\(app).ingest.timestamp_window_s",
                app: bundleID,
                reason: "must be at least 1 second"
            )
        }
        if rateLimits.perDevicePerHour < 1 {
            throw AppsFileError(
                .invalidValue,
                field: "\(app).rate_limits.per_device_per_hour",
                app: bundleID,
                reason: "must be at least 1, got \(rateLimits.perDevicePerHour)"
            )
        }
        if rateLimits.perAppPerSecond < 1 {
            throw AppsFileError(
                .invalidValue,
                field: "\(app).rate_limits.per_app_per_second",
                app: bundleID,
                reason: "must be at least 1, got \(rateLimits.perAppPerSecond)"
            )
        }
    }

    /// Apple's rule: letters, digits, `-` and `.`, with no empty component.
    static func bundleIDProblem(_ bundleID: String) -> String? {
        if bundleID.isEmpty {
            return "the bundle id must not be empty"
        }
        let allowed = bundleID.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || scalar == "-" || scalar == ".")
        }
        if !allowed {
            return "the bundle id may contain only letters, digits, '-' and '.'"
        }
        if bundleID.split(separator: ".", omittingEmptySubsequences: false).contains(where: \.isEmpty) {
            return "the bundle id must not start or end with '.' or contain '..'"
        }
        return nil
    }

    private static func requireFile(_ path: String, field: String, app: String) throws(AppsFileError) {
        if path.allSatisfy(\.isWhitespace) {
            throw AppsFileError(.invalidValue, field: field, app: app, reason: "must not be empty")
        }
    }

    /// Key ids and team ids are exactly 10 ASCII letters or digits.
    private static func requireTenCharacterID(_ id: String, field: String, app: String) throws(AppsFileError) {
        let valid =
            id.unicodeScalars.count == 10
            && id.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)) }
        if !valid {
            throw AppsFileError(
                .invalidValue,
                field: field,
                app: app,
                reason: "must be 10 characters (letters and digits), got \(AppsFileError.quoted(id))"
            )
        }
    }
}

// MARK: - Descriptions without secrets

extension AppConfiguration.APNsCredentials: CustomStringConvertible {
    /// Names the files and ids, never the certificate password.
    public var description: String {
        switch self {
        case .token(let key):
            "token(key_file: \(key.keyFile), key_id: \(key.keyID), team_id: \(key.teamID))"
        case .pkcs12(let certificateFile, _):
            "pkcs12(certificate_file: \(certificateFile))"
        case .pem(let certificateFile, let privateKeyFile):
            "pem(certificate_file: \(certificateFile), private_key_file: \(privateKeyFile))"
        }
    }
}

extension AppConfiguration.Ingest: CustomStringConvertible {
    /// Counts the API keys and says whether a secret is set, never their values.
    public var description: String {
        "Ingest(api_keys: \(apiKeys.count), credential: \(credential.rawValue), secret: \(secret == nil ? "none" : "set"), "
            + "timestamp_window: \(timestampWindow))"
    }
}
