import PushCore

/// The `apns-priority` header.
public enum APNsPriority: Int, Sendable, Hashable, CaseIterable {
    /// Deliver immediately (alerts, sounds, badges).
    case immediate = 10
    /// Deliver when power considerations allow (required for background pushes).
    case conserveEnergy = 5
    /// Prioritise the device's power over everything; may not wake the device.
    case low = 1
}
