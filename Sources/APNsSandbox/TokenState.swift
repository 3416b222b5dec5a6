/// What the admin API set for a device token (`PUT /tokens/{token}`).
public enum TokenState: Sendable, Equatable {
    /// Later pushes answer 410 `Unregistered` with this `timestamp` (ms since 1970).
    case unregistered(timestamp: Int64)
    /// Later pushes answer 410 `ExpiredToken` ("The device token has expired") with this `timestamp`.
    case expired(timestamp: Int64)
    /// Later pushes answer 400 `BadDeviceToken`.
    case bad
    /// A Live Activity token (a push-to-start token or an activity's update token): APNs delivers
    /// only `liveactivity` pushes to it (topic `<bundle id>.push-type.liveactivity`); any other push
    /// answers 400 `DeviceTokenNotForTopic`, as Apple's servers answer a provider that sends an
    /// activity's token with the app's plain topic.
    case liveActivity
}
