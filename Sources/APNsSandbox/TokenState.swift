/// What the admin API set for a device token (`PUT /tokens/{token}`).
public enum TokenState: Sendable, Equatable {
    /// Later pushes answer 410 `Unregistered` with this `timestamp` (ms since 1970).
    case unregistered(timestamp: Int64)
    /// Later pushes answer 400 `BadDeviceToken`.
    case bad
}
