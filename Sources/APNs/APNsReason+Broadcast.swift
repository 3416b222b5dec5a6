/// The reasons broadcast and channel-management requests add to APNs' table (Apple's "Handling error
/// responses from Apple Push Notification service", the broadcast table). The reasons they share
/// with device notifications (`BadPriority`, `BadExpirationDate`, `PayloadTooLarge`,
/// `TopicDisallowed`, the 403s, …) are the constants in ``APNsReason``.
extension APNsReason {
    // 400
    /// The app's Broadcast capability is not enabled (developer.apple.com, the App ID).
    public static let featureNotEnabled = APNsReason("FeatureNotEnabled")
    /// How APNs spells ``featureNotEnabled`` in its answers to broadcasts (as independent clients report).
    public static let broadcastFeatureNotEnabled = APNsReason("BroadcastFeatureNotEnabled")
    /// The request named no channel: `apns-channel-id` is missing.
    public static let missingChannelId = APNsReason("MissingChannelId")
    /// `apns-channel-id` is not properly encoded (base64), or longer than allowed.
    public static let badChannelId = APNsReason("BadChannelId")
    /// No channel with that `apns-channel-id` exists for the app (never created, or deleted).
    public static let channelNotRegistered = APNsReason("ChannelNotRegistered")
    /// The JSON body holds an attribute APNs does not recognise.
    public static let badRequestParams = APNsReason("BadRequestParams")
    /// The JSON body cannot be parsed.
    public static let badRequestPayload = APNsReason("BadRequestPayload")
    /// The push type (`apns-push-type`, or the body's `push-type`) is missing.
    public static let missingPushType = APNsReason("MissingPushType")
    /// The app has reached its channel limit (10,000 per environment): delete channels it no longer uses.
    public static let cannotCreateChannelConfig = APNsReason("CannotCreateChannelConfig")
    // 403
    /// The bundle ids of the token or certificate do not include the one in the path.
    public static let topicMismatch = APNsReason("TopicMismatch")

    /// Every reason Apple lists for broadcast and channel-management requests, with its status
    /// (`Service Unavailable` is spelled so in the table; APNs' answers say `ServiceUnavailable`).
    public static let documentedForBroadcast: [(reason: APNsReason, status: Int)] = [
        (.featureNotEnabled, 400), (.missingChannelId, 400), (.badChannelId, 400), (.channelNotRegistered, 400),
        (.badRequestParams, 400), (.badRequestPayload, 400), (.payloadEmpty, 400), (.badMessageId, 400), (.missingPushType, 400),
        (.invalidPushType, 400), (.cannotCreateChannelConfig, 400), (.badExpirationDate, 400), (.topicDisallowed, 400),
        (.badPriority, 400),
        (.badCertificate, 403), (.badCertificateEnvironment, 403), (.topicMismatch, 403), (.missingProviderToken, 403),
        (.expiredProviderToken, 403), (.invalidProviderToken, 403),
        (.badPath, 404), (.methodNotAllowed, 405), (.payloadTooLarge, 413), (.tooManyRequests, 429),
        (.tooManyProviderTokenUpdates, 429), (.internalServerError, 500), (.serviceUnavailable, 503), (.shutdown, 503),
    ]
}
