import APNs
import PushCore

/// What the admin API configured that changes answers: token states and faults. Workers keep a copy
/// and refresh it only when ``SandboxState``'s generation moved, so the hot path takes no lock.
struct SandboxRules: Sendable {
    var tokenStates: [String: TokenState] = [:]
    var faults = SandboxFaults()

    /// The answer for a notification the validator accepted: an injected status fault, else the
    /// token's state; nil means deliver.
    func rejection(for push: AcceptedPush, roll: Double) -> PushRejection? {
        if let injected = faults.injectedRejection(roll: roll) { return injected }
        switch tokenStates[push.deviceToken] {
        case .unregistered(let timestamp)?: return PushRejection(410, .unregistered, timestamp: timestamp)
        case .expired(let timestamp)?: return PushRejection(410, .expiredToken, timestamp: timestamp)
        case .bad?: return PushRejection(400, .badDeviceToken)
        case .liveActivity?: return push.pushType == .liveactivity ? nil : PushRejection(400, .deviceTokenNotForTopic)
        case nil: return nil
        }
    }
}
