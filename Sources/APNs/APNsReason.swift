/// The `reason` APNs gives for a refused notification (Apple's "Handling notification responses
/// from APNs"). Every documented reason has a constant; an unknown one is kept as text.
public struct APNsReason: Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String

    public init(_ rawValue: String) {
        self.rawValue = rawValue
    }

    public var description: String { rawValue }

    // 400 Bad request
    public static let badCollapseId = APNsReason("BadCollapseId")
    public static let badDeviceToken = APNsReason("BadDeviceToken")
    public static let badExpirationDate = APNsReason("BadExpirationDate")
    public static let badMessageId = APNsReason("BadMessageId")
    public static let badPriority = APNsReason("BadPriority")
    public static let badTopic = APNsReason("BadTopic")
    public static let deviceTokenNotForTopic = APNsReason("DeviceTokenNotForTopic")
    public static let duplicateHeaders = APNsReason("DuplicateHeaders")
    public static let idleTimeout = APNsReason("IdleTimeout")
    public static let invalidPushType = APNsReason("InvalidPushType")
    public static let missingDeviceToken = APNsReason("MissingDeviceToken")
    public static let missingTopic = APNsReason("MissingTopic")
    public static let payloadEmpty = APNsReason("PayloadEmpty")
    public static let topicDisallowed = APNsReason("TopicDisallowed")
    // 403 Forbidden: certificate or provider-token problems
    public static let badCertificate = APNsReason("BadCertificate")
    public static let badCertificateEnvironment = APNsReason("BadCertificateEnvironment")
    public static let expiredProviderToken = APNsReason("ExpiredProviderToken")
    public static let forbidden = APNsReason("Forbidden")
    public static let invalidProviderToken = APNsReason("InvalidProviderToken")
    public static let missingProviderToken = APNsReason("MissingProviderToken")
    public static let unrelatedKeyIdInToken = APNsReason("UnrelatedKeyIdInToken")
    public static let badEnvironmentKeyIdInToken = APNsReason("BadEnvironmentKeyIdInToken")
    /// How APNs spells ``badEnvironmentKeyIdInToken`` in its answers (as independent clients report).
    public static let badEnvironmentKeyInToken = APNsReason("BadEnvironmentKeyInToken")
    // 404, 405
    public static let badPath = APNsReason("BadPath")
    public static let methodNotAllowed = APNsReason("MethodNotAllowed")
    // 410 Gone
    public static let expiredToken = APNsReason("ExpiredToken")
    public static let unregistered = APNsReason("Unregistered")
    // 413, 429, 500, 503
    public static let payloadTooLarge = APNsReason("PayloadTooLarge")
    public static let tooManyProviderTokenUpdates = APNsReason("TooManyProviderTokenUpdates")
    public static let tooManyRequests = APNsReason("TooManyRequests")
    public static let internalServerError = APNsReason("InternalServerError")
    public static let serviceUnavailable = APNsReason("ServiceUnavailable")
    public static let shutdown = APNsReason("Shutdown")

    /// Apple's tables and APNs' answers spell a few reasons differently: the answer's spelling →
    /// the table's. Classifications switch on ``canonical``, so both spellings mean the same.
    static let spellings: [String: APNsReason] = [
        "BadEnvironmentKeyInToken": .badEnvironmentKeyIdInToken,
        "BroadcastFeatureNotEnabled": .featureNotEnabled,
    ]

    /// This reason as Apple's table spells it (itself unless APNs is known to spell it otherwise).
    public var canonical: APNsReason { Self.spellings[rawValue] ?? self }

    /// Whether the reason is in one of Apple's tables (in either spelling).
    public static func isDocumented(_ reason: APNsReason) -> Bool {
        let canonical = reason.canonical
        return documented.contains { $0.reason == canonical } || documentedForBroadcast.contains { $0.reason == canonical }
    }

    /// Every documented reason with the status APNs answers it with.
    public static let documented: [(reason: APNsReason, status: Int)] = [
        (.badCollapseId, 400), (.badDeviceToken, 400), (.badExpirationDate, 400), (.badMessageId, 400),
        (.badPriority, 400), (.badTopic, 400), (.deviceTokenNotForTopic, 400), (.duplicateHeaders, 400),
        (.idleTimeout, 400), (.invalidPushType, 400), (.missingDeviceToken, 400), (.missingTopic, 400),
        (.payloadEmpty, 400), (.topicDisallowed, 400),
        (.badCertificate, 403), (.badCertificateEnvironment, 403), (.expiredProviderToken, 403), (.forbidden, 403),
        (.invalidProviderToken, 403), (.missingProviderToken, 403), (.unrelatedKeyIdInToken, 403),
        (.badEnvironmentKeyIdInToken, 403),
        (.badPath, 404), (.methodNotAllowed, 405), (.expiredToken, 410), (.unregistered, 410), (.payloadTooLarge, 413),
        (.tooManyProviderTokenUpdates, 429), (.tooManyRequests, 429), (.internalServerError, 500),
        (.serviceUnavailable, 503), (.shutdown, 503),
    ]
}

/// What to do about an APNs answer; push-send acts on this, not on raw statuses.
public enum APNsOutcome: Sendable, Equatable {
    /// 200: APNs accepted the notification.
    case delivered
    /// Try again later (429, 500, 503, an idle or shut-down connection, a transport failure).
    case retry
    /// The token is dead or not this app's: stop sending to it. `since` is APNs' 410 timestamp (ms),
    /// the moment it learned the token was invalid, for the invalid-token rule.
    case invalidToken(since: Int64?)
    /// The notification itself is wrong (bad topic, too large, …): retrying cannot help.
    case permanentFailure
    /// The app's credentials are wrong or expired: the app's work should pause until fixed.
    case credentialProblem

    /// Classifies an answer. `reason` is nil for a 200 or when APNs gave none.
    public init(status: Int, reason: APNsReason?, timestamp: Int64?) {
        switch (status, reason?.canonical) {
        case (200, _):
            self = .delivered
        case (410, _), (_, .badDeviceToken?), (_, .deviceTokenNotForTopic?):
            self = .invalidToken(since: timestamp)
        case (_, .idleTimeout?), (_, .shutdown?), (_, .tooManyRequests?), (_, .tooManyProviderTokenUpdates?),
            (429, _), (500...599, _):
            self = .retry
        case (403, _):
            self = .credentialProblem
        default:
            self = .permanentFailure
        }
    }
}
